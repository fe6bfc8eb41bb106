"""Only what pyproject.toml cannot say: the package list. Everything else is in pyproject.toml.

The packages are found, not listed (a hand-kept list once left out agent_threads.hooks and
`pip install .` gave a program that could not import it), and one more is added: the repo's
top-level configs/ ships as `supervisor.configs` (package-dir in pyproject.toml), so the
installed program finds its examples, schema and systemd unit with importlib.resources.
pyproject's `packages.find` cannot add it: setuptools' discovery ignores package-dir mappings.
"""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["supervise", "supervisor*", "agent_threads*", "state*"]),
        "supervisor.configs",
    ]
)
