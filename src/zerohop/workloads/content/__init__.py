"""What a request carries: prompts of an exact size (`prompts`, `word_counts`), a local
tokenizer (`local_tokenizer`) and synthetic images (`synthetic_images`). Imports nothing
else of the workloads."""
