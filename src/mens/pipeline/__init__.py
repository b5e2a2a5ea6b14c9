"""`mens pipeline`: every stage in one command, skipping the unchanged ones.

    runner.py       the stage runner: run/skip reasons, pipeline_state.json, resume; the config's own keys
    stages.py       the stages in order: the corpus ones (mens.corpus.stages) + training and judging
    training.py     the training stages' calls and their sections' checks
    judging.py      the judging stages' calls, their options, and the run they judge
    cli.py          `mens pipeline` and its summary table

A stage is a mens.stage.Stage; fingerprints are mens.fingerprint's (shared with the corpus reports).
"""
