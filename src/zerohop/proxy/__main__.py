"""`python -m zerohop.proxy`: the layer proxy as its own process (see `cli.proxy_command`)."""

from zerohop.proxy.proxy_command import proxy_command

proxy_command(prog_name="zerohop proxy")
