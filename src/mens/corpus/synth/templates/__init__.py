"""Program templates for synthetic Vox data: each is `fn(ctx: Ctx) -> Draft` (see core.py); the
table that names them is `mens.corpus.synth.generate.TEMPLATES`."""
