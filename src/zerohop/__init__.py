"""zerohop: load tests and GPU-floor microbenchmarks for LLM serving stacks.

Importing the package does nothing beyond defining names (no threads, sockets or
signal handlers): Locust forks after import, and tools import us in odd places.
"""

__version__ = "0.1.0"
