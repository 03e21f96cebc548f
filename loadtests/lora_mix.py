"""Requests over many LoRA adapters with Zipf popularity, more than the server keeps
resident: adapter swaps and mixed batches."""

from locust import events

from zerohop.loadgen.hooks import install
from zerohop.loadgen.users import LLMUser

install(events)


class LoRAMix(LLMUser):
    workload_kind = "lora_mix"
    weight = 2  # for a workload whose file sets no weight
