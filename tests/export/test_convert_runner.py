"""The workarounds around llama.cpp's converter (mens.export.convert_runner) wrap
`conversion.base.TextModel.get_vocab_base_pre`, set `conversion.base.ModelBase.no_mtp` (what the
converter's --no-mtp sets, read by the families with MTP: Qwen3.5's among them); export reads the
converter's table of families without importing it (gguf.converter_architectures: the names
`conversion.get_model_class` takes, and NotImplementedError for any other); merge keeps
a base's tokenizer class because Phi-3's converter tells Phi-4's GPT-2 vocabulary by it: this
fails when the converter changes any of them. One child process, as the converter imports torch."""

import inspect
import subprocess
import sys

_PROBE = """
import inspect, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + '/gguf-py']
from conversion import base, get_model_class
print(list(inspect.signature(base.TextModel.get_vocab_base_pre).parameters))
mro = [c for c in get_model_class('Qwen3_5ForCausalLM').__mro__
       if c.__module__.startswith('conversion.') and c is not base.ModelBase]
print(base.ModelBase.no_mtp, any('.no_mtp' in inspect.getsource(c) for c in mro))
print('GPT2Tokenizer' in inspect.getsource(get_model_class('Phi3ForCausalLM').set_vocab))
try:
    get_model_class('PhimoeForCausalLM')
except NotImplementedError:
    print('refused')
import conversion
print(sorted(conversion.TEXT_MODEL_MAP))
"""


def test_converter_still_has_what_the_runner_relies_on(llama_cpp):
    from mens.export import convert_runner
    from mens.export.gguf import converter_architectures, converter_dir

    out = subprocess.run([sys.executable, "-c", _PROBE, str(converter_dir())], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:4] == ["['self', 'tokenizer']", "False True", "True", "refused"]
    known = converter_architectures(converter_dir())
    assert lines[4] == str(sorted(known)) and "Qwen3_5ForCausalLM" in known and "PhimoeForCausalLM" not in known
    assert "except NotImplementedError" in inspect.getsource(convert_runner.wrap_pre_tokenizer)
