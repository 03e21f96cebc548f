"""`python -m zerohop.layer`: the layer proxy as its own process (see `cli.proxy_command`)."""

from zerohop.layer.cli import proxy_command

proxy_command(prog_name="zerohop proxy")
