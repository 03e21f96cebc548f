"""`python -m zerohop.sim` runs `zerohop sim`."""

from zerohop.sim.sim_command import sim_command

sim_command(prog_name="zerohop sim")
