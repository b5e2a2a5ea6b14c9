"""The one workaround around llama.cpp's converter (mens.export.convert_runner) wraps
`conversion.base.TextModel.get_vocab_base_pre`: this fails when the converter changes it."""

import inspect
import subprocess
import sys


def test_converter_still_has_the_wrapped_method(llama_cpp):
    from mens.export.gguf import converter_dir

    code = ("import sys, inspect; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/gguf-py']; "
            "from conversion import base; print(list(inspect.signature(base.TextModel.get_vocab_base_pre).parameters))")
    out = subprocess.run([sys.executable, "-c", code, str(converter_dir())], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['self', 'tokenizer']"
    assert "NotImplementedError" in inspect.getsource(__import__("mens.export.convert_runner").export.convert_runner)
