"""Extend a base's vocabulary with a language's frequent words: the experiment of docs/base.md
("A base sized for the fine-tune's budget"), not yet a mens feature.

    .venv/bin/python bench/base_vocab.py BASE_DIR OUT_DIR examples/vox 150

The words: the N most frequent identifiers, keywords and decorators of the tree's .vox files
that BASE's BPE splits into 2+ tokens, each added with and without its leading space as a
whole-word token; the new embedding rows (tied head) start as the mean of the rows of the pieces
they replace. OUT_DIR is a model directory `mens train --model` takes."""
import sys, re, collections, json, shutil
from pathlib import Path
import torch
from transformers import AutoTokenizer, AutoModelForCausalLM
from tokenizers import AddedToken
src, out, vox_dir, n = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
tok = AutoTokenizer.from_pretrained(src)
model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
counts = collections.Counter()
for f in vox_dir.rglob('*.vox'):
    counts.update(re.findall(r'@?[A-Za-z_][A-Za-z_0-9]*', f.read_text(errors='replace')))
words = []
for w, c in counts.most_common():
    if len(tok(' ' + w, add_special_tokens=False)['input_ids']) >= 2 or len(tok(w, add_special_tokens=False)['input_ids']) >= 2:
        words.append(w)
    if len(words) >= n:
        break
emb = model.get_input_embeddings().weight.data
pieces = {}
new = []
for w in words:
    for form in (' ' + w, w):
        ids = tok(form, add_special_tokens=False)['input_ids']
        if len(ids) >= 2 and form not in tok.get_vocab():
            new.append(AddedToken(form, single_word=True, normalized=False))
            pieces[form] = ids
added = tok.add_tokens(new)
model.resize_token_embeddings(len(tok), mean_resizing=False)
emb = model.get_input_embeddings().weight.data
for form, ids in pieces.items():
    emb[tok.convert_tokens_to_ids(form)] = emb[ids].mean(0)
model.save_pretrained(out); tok.save_pretrained(out)
for f in ('generation_config.json', 'chat_template.jinja'):
    if (src / f).exists(): shutil.copy(src / f, out / f)
print('words', len(words), 'added', added, words[:40])
for s in ["@endpoint(kind: mutation)", "fn crates_needed(loaves: int) to int {", "@table type Order {"]:
    print([tok.decode([i]) for i in tok(s, add_special_tokens=False)['input_ids']])
