"""The files a user of supervise needs beside the program, installed as `supervisor.configs`.

Example hook files and the quickstart's fake migration (examples/), the `/push` `/pop`
extension (extensions/stack.py), the hook file's JSON Schema and the systemd unit.
`supervise examples DIR` copies them out of an installed package (supervisor/examples.py).
"""
