"""Runs and arms side by side: `compare` (per-percentile deltas with bootstrap
intervals, a verdict per metric; its values read once by `compared_values`),
`comparability` (whether two runs may be compared), `arms` and `layer_knee` (one run,
several arms: what a layer costs, and where its cost starts to grow), `probe` (what the
load did to an unrelated short request) and `answers` (did the load change them)."""
