"""`mens pipeline`: every stage in one command, skipping the unchanged ones.

    runner.py       the stage runner: Stage/Context, run/skip reasons, pipeline_state.json, resume
    stages.py       the 12 stages: inputs, outputs, params, packs and the call that does each
    fingerprint.py  what a stage's output depends on (shared with the corpus stages' reports)
    cli.py          `mens pipeline` and its summary table
"""
