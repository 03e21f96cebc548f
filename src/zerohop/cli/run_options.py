"""`zerohop run`'s click options, generated from the one settings model
(`loadgen.run_settings.RunSettings`): a flag is declared there and nowhere else."""

from __future__ import annotations

from zerohop.runner.setting_options import setting_options

run_options = setting_options()  # every setting, in the model's order
