"""`mens train --bench DIR --bench-every N`: bench pass@1 lands in telemetry while training,
and benching does not change the training trajectory."""

import json

from paths import EXAMPLES
from train_helpers import train_args, write_pairs


def _events(run, kind):
    return [e for e in map(json.loads, (run / "telemetry.jsonl").read_text().splitlines()) if e["event"] == kind]


def test_bench_every_logs_pass_at_1_without_changing_losses(run_cli, tiny_model_dir, tmp_path):
    data = write_pairs(tmp_path / "data", n=16)
    bench = EXAMPLES / "bench" / "vox_heldout.jsonl"
    plain, benched = tmp_path / "plain", tmp_path / "benched"
    assert run_cli(*train_args(tiny_model_dir, data, plain, max_steps=4, backend="lora"))[0] == 0
    code, _, err = run_cli(*train_args(tiny_model_dir, data, benched, max_steps=4, backend="lora", bench=bench,
                                       bench_every=2, bench_limit=2))
    assert code == 0, err
    benches = _events(benched, "bench")
    assert [e["step"] for e in benches] == [2, 4]  # every 2 steps, and once at the end
    assert all(0.0 <= e["pass_at_1"] <= 1.0 and e["tasks"] == 2 for e in benches)
    assert [e["loss"] for e in _events(benched, "step")] == [e["loss"] for e in _events(plain, "step")]
