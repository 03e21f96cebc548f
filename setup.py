"""Which packages the build holds, and where their files are: the one part of the build
that pyproject.toml cannot say.

loadtests/, workloads/ and report_templates/ stay at the top of the checkout: users read,
copy and run them there (`locust -f loadtests/`, `--workload workloads/lora_mix.yaml`),
and they are the only copy of each file. `package_dir` maps each folder onto a package
under `zerohop.shipped`, so one mechanism serves every install:

- a wheel (`pip install .`, `pip wheel .`, pipx) copies the folders into
  site-packages/zerohop/shipped/, and
- an editable install (`pip install -e .`) maps the same package names onto the
  checkout's folders,

and the code finds them with `importlib.resources` either way (src/zerohop/shipped).
Each folder holds an `__init__.py` because setuptools' editable finder only maps a
folder that is a regular package.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup

SHIPPED_FOLDERS = ("loadtests", "workloads", "report_templates")


def shipped_packages() -> list[str]:
    """`zerohop.shipped.<folder>` and one package per subfolder (report_templates/static),
    so setuptools ships their files as package data, not as 'ignored packages'."""
    names = []
    for folder in SHIPPED_FOLDERS:
        subfolders = sorted(p for p in Path(folder).rglob("*")
                            if p.is_dir() and "__pycache__" not in p.parts)
        names += [".".join(("zerohop", "shipped", *p.parts)) for p in [Path(folder), *subfolders]]
    return names


setup(
    packages=[
        *find_namespace_packages("src", include=["zerohop", "zerohop.*"],
                                 exclude=["*.__pycache__", "*.__pycache__.*"]),
        *shipped_packages(),
    ],
    package_dir={"": "src", **{f"zerohop.shipped.{name}": name for name in SHIPPED_FOLDERS}},
)
