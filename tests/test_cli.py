import subprocess
import sys
import time


def test_help_lists_commands_and_is_fast():
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "mens", "--help"], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    assert "vox" in out.stdout
    # The CLI must not import torch/transformers just to print help.
    probe = subprocess.run([sys.executable, "-c", "import sys, mens.cli; mens.cli.build_parser(); "
                            "print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"],
                           capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[]"
    assert elapsed < 5  # generous: the real check is the import probe above


def test_unknown_command_exits_2():
    out = subprocess.run([sys.executable, "-m", "mens", "nope"], capture_output=True, text=True)
    assert out.returncode == 2
