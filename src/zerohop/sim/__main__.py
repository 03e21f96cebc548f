"""`python -m zerohop.sim` runs `zerohop sim`, after the plugins the CLI names in
`ZEROHOP_PLUGINS` (and the `zerohop.plugins` entry points): a plugin's API is served
here, in the target's own process, as in the CLI's."""

import sys

from zerohop.core.exit_codes import EXIT_BAD_INPUT
from zerohop.core.plugins import PluginError, load_plugins_from_environment

try:
    load_plugins_from_environment()
except PluginError as exc:
    print(f"zerohop sim: error: {exc}", file=sys.stderr)
    sys.exit(EXIT_BAD_INPUT)

from zerohop.sim.sim_command import sim_command

sim_command(prog_name="zerohop sim")
