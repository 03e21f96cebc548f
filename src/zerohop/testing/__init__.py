"""Helpers that stand up real serving engines for zerohop's end-to-end tests.

Pytest-free on purpose: the same code backs the test fixtures, tools/vllm_cpu/serve.py
and anyone reproducing a CI failure by hand. Importing it starts nothing.
"""
