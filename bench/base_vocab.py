"""Extend a base's vocabulary with a language's frequent words: the experiment of docs/base.md
("A base sized for the fine-tune's budget"), not yet a mens feature.

    .venv/bin/python bench/base_vocab.py BASE_DIR OUT_DIR examples/vox 150

The words: the N most frequent identifiers, keywords and decorators of the tree's .vox files
that BASE's BPE splits into 2+ tokens, each added with and without its leading space as a
whole-word token; the new embedding rows (tied head) start as the mean of the rows of the pieces
they replace. OUT_DIR is a model directory `mens train --model` takes."""
import collections
import re
import shutil
import sys
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
words, pieces = [], {}  # the N most frequent words the BPE splits; each split form -> its pieces' ids
for w, _ in counts.most_common():
    split = {form: ids for form in (' ' + w, w)
             if len(ids := tok(form, add_special_tokens=False)['input_ids']) >= 2 and form not in tok.get_vocab()}
    if split:
        words.append(w)
        pieces.update(split)
    if len(words) >= n:
        break
new = [AddedToken(form, single_word=True, normalized=False) for form in pieces]
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
