def test_tiny_model_loads_and_chats(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    text = tok.apply_chat_template([{"role": "user", "content": "fn add"}], tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")
    ids = tok(text, return_tensors="pt").input_ids
    assert tok.decode(ids[0]) == text
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape[-1] == len(tok) and torch.isfinite(logits).all()
