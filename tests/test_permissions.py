"""Permission rules: deny beats ask beats allow; layers only tighten; commands part by part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_threads.permissions import Layer, Profile, Rule, Where
from agent_threads.shellparse import parse

DENY_RM = {"allow": ["Bash(git:*)", "Read"], "ask": ["Edit"], "deny": ["Bash(rm:*)"]}


def decide(perms: dict[str, Any] | list[dict[str, Any]], tool: str, **args: Any) -> str:
    layers = perms if isinstance(perms, list) else [perms]
    return Profile.from_json(layers).check(tool, args).decision


@pytest.mark.parametrize(
    ("tool", "args", "want"),
    [
        ("Bash", {"command": "git status"}, "allow"),
        ("Bash", {"command": "git"}, "allow"),
        ("Bash", {"command": "gitk --all"}, "ask"),  # a word boundary, not a string prefix
        ("Bash", {"command": "rm -rf build"}, "deny"),
        ("Bash", {"command": "git status && rm -rf /"}, "deny"),
        ("Bash", {"command": "git log | less"}, "ask"),  # every part must be allowed
        ("Bash", {"command": "git commit -m 'a; rm -rf /'"}, "allow"),  # quoted: one command
        ("Bash", {"command": "git $(rm -rf /)"}, "deny"),  # substitutions are looked into
        ("Bash", {"command": "git log $(whoami)"}, "ask"),  # and never allowed by a prefix
        ("Bash", {"command": "git log `whoami`"}, "ask"),
        ("Bash", {"command": "echo hi\nrm x"}, "deny"),
        ("Read", {"path": "/etc/passwd"}, "allow"),
        ("Edit", {"path": "a.py", "old_string": "a", "new_string": "b"}, "ask"),
        ("Write", {"path": "a.py", "content": ""}, "ask"),  # unlisted
        ("RunProcess", {"command": ["rm", "-rf", "x"]}, "deny"),  # not Bash: ask unless listed
        ("UpdatePlan", {"tasks": []}, "allow"),  # changes nothing outside the thread
    ],
)
def test_decisions(tool: str, args: dict[str, Any], want: str) -> None:
    perms = dict(DENY_RM)
    if tool == "RunProcess":
        perms = {"deny": ["RunProcess(rm:*)"]}
    assert decide(perms, tool, **args) == want


def test_deny_beats_ask_beats_allow_in_one_layer() -> None:
    both = {"allow": ["*"], "ask": ["Bash"], "deny": ["Bash(curl:*)"]}
    assert decide(both, "Bash", command="ls") == "ask"
    assert decide(both, "Bash", command="curl x") == "deny"
    assert decide(both, "Read", path="x") == "allow"


def test_exact_rules_and_paths() -> None:
    perms = {"allow": ["Read(/etc/hosts)", "Write(out/:*)"]}
    assert decide(perms, "Read", path="/etc/hosts") == "allow"
    assert decide(perms, "Read", path="/etc/hosts2") == "ask"
    assert decide(perms, "Write", path="out/x.txt", content="") == "allow"


def test_empty_profile_asks_but_lets_plans_through() -> None:
    assert decide([], "Bash", command="ls") == "ask"
    assert decide([], "UpdatePlan", tasks=[]) == "allow"
    assert decide({"deny": ["UpdatePlan"]}, "UpdatePlan", tasks=[]) == "deny"


def test_inheritance_only_tightens() -> None:
    parent = Profile.from_json([{"allow": ["Bash"], "deny": ["Bash(rm:*)"]}])
    assert parent.check("Bash", {"command": "ls"}).decision == "allow"
    child = parent.inherit(Layer.from_mapping({}))
    assert child.check("Bash", {"command": "ls"}).decision == "ask"  # the child lists nothing
    wide = parent.inherit(Layer.from_mapping({"allow": ["*"]}))
    assert wide.check("Bash", {"command": "rm -rf /"}).decision == "deny"
    assert wide.check("Bash", {"command": "ls"}).decision == "allow"
    assert parent.inherit(None) == parent


def test_verdict_says_which_rule() -> None:
    v = Profile.from_json([DENY_RM]).check("Bash", {"command": "rm x"})
    assert (v.rule, v.reason) == ("Bash(rm:*)", "denied by rule Bash(rm:*)")
    v = Profile.from_json([DENY_RM]).check("Write", {"path": "x"})
    assert v.rule is None and v.reason.startswith("no rule allows Write of /")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "bad permission rule"),
        ("Bash(", "bad permission rule 'Bash('"),
        ("Bash()", "empty pattern"),
        ("*(x)", "* takes no pattern"),
        ("rm -rf", "bad permission rule"),
    ],
)
def test_bad_rules_say_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"write Bash, Bash\(git:\*\)") as info:
        Rule.parse(text)
    assert message in str(info.value)


def test_bad_layers() -> None:
    with pytest.raises(ValueError, match="unknown key 'alow' under permissions; use allow"):
        Layer.from_mapping({"alow": ["Read"]})
    with pytest.raises(ValueError, match=r"permissions\.deny must be a list"):
        Layer.from_mapping({"deny": "Bash"})


def test_rules_round_trip() -> None:
    for text in ["Bash", "Bash(git:*)", "Read(/etc/hosts)", "*", "Bash(npm run test:*)"]:
        assert str(Rule.parse(text)) == text
    profile = Profile.from_json([DENY_RM, {"allow": ["*"]}])
    assert Profile.from_json(profile.to_json()) == profile


def test_parse_finds_every_simple_command() -> None:
    def argvs(text: str) -> list[tuple[str | None, ...]]:
        return [c.argv for c in parse(text).commands]

    assert argvs("a; b && c || d | e & f") == [("a",), ("b",), ("c",), ("d",), ("e",), ("f",)]
    assert argvs("echo 'x;y' \"a&&b\" c\\;d") == [("echo", "x;y", "a&&b", "c;d")]
    assert argvs('echo "$(id)"') == [("id",), ("echo", None)]
    assert argvs("cat <(ls)") == [("ls",), ("cat", None)]
    assert parse("ls; ;").error is not None


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp/w (the thread's directory, with a symlink `link` to tmp/outside) and tmp/home."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for d in ("w/sub", "outside", "home/runs/1"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "w" / "link").symlink_to(tmp_path / "outside")
    (tmp_path / "w" / "spec-link").symlink_to(tmp_path / "home" / "runs" / "1" / "spec.json")
    return tmp_path


def test_path_rules_compare_the_real_path(tree: Path) -> None:
    w, where = tree / "w", Where(cwd=tree / "w")
    profile = Profile.from_json([{"allow": [f"Edit({w}/:*)", "Read"]}])

    def edit(path: str) -> str:
        return profile.check("Edit", {"path": path}, where).decision

    assert edit(f"{w}/a.py") == edit("a.py") == edit("sub/new.py") == "allow"
    assert edit("~/w/a.py") == "allow"  # ~ expands
    assert edit(f"{w}/../outside/x") == "ask"  # `..` does not stay under /w/
    assert edit("../outside/x") == "ask"  # relative to the thread's directory
    assert edit(f"{w}/link/x") == "ask"  # a symlink is judged by its target
    assert edit(f"{tree}/wx/a.py") == "ask"  # /w/ is a directory, not a text prefix
    assert edit("~nosuchuser/x") == "allow"  # bash leaves it as written: w/~nosuchuser/x
    moved = Profile.from_json([{"allow": ["Edit(~/w/:*)", "Edit(sub/:*)"]}])
    assert moved.check("Edit", {"path": f"{w}/a.py"}, where).decision == "allow"
    assert moved.check("Edit", {"path": "sub/../../x"}, where).decision == "ask"


def test_deny_path_rules_cannot_be_dodged(tree: Path) -> None:
    where = Where(cwd=tree / "w")
    profile = Profile.from_json([{"allow": ["Read"], "deny": [f"Read({tree}/outside/:*)"]}])
    for path in ("link/secret", "../outside/secret", f"{tree}/w/./sub/../link/secret"):
        assert profile.check("Read", {"path": path}, where).decision == "deny", path
    assert profile.check("Read", {"path": "sub/x"}, where).decision == "allow"


def test_supervise_home_is_never_a_tools(tree: Path) -> None:
    where = Where(cwd=tree / "w", home=tree / "home")
    everything = Profile.from_json([{"allow": ["*"]}])
    spec = f"{tree}/home/runs/1/spec.json"
    for tool, path in [
        ("Edit", spec),
        ("Write", "../home/runs/1/spec.json"),  # the issue's /w/../$SUPERVISE_HOME/... edit
        ("Edit", "spec-link"),  # through a symlink
        ("Read", f"{tree}/home/state.db"),
    ]:
        v = everything.check(tool, {"path": path}, where)
        assert v.decision == "deny" and "$SUPERVISE_HOME" in v.reason, (tool, path)
    assert everything.check("Edit", {"path": "a.py"}, where).decision == "allow"


RULES = st.sampled_from(["Bash", "Bash(git:*)", "Bash(rm:*)", "Read", "*", "Edit", "Write(a:*)"])
LAYERS = st.fixed_dictionaries(
    {}, optional={k: st.lists(RULES, max_size=3) for k in ("allow", "ask", "deny")}
)
CALLS = st.sampled_from(
    [
        ("Bash", {"command": "git status"}),
        ("Bash", {"command": "rm -rf /"}),
        ("Bash", {"command": "git x && rm y"}),
        ("Bash", {"command": "git status #'\nrm -f v\n#'"}),
        ("Bash", {"command": "git -c alias.x='!rm v' x"}),
        ("Bash", {"command": "timeout 5 /bin/rm v"}),
        ("Bash", {"command": "$X v"}),
        ("Bash", {"command": "ls; ;"}),
        ("Read", {"path": "a/../../etc/passwd"}),
        ("Read", {"path": "a"}),
        ("Write", {"path": "a/b"}),
        ("Edit", {"path": "c"}),
        ("UpdatePlan", {"tasks": []}),
    ]
)
RANK = {"allow": 0, "ask": 1, "deny": 2}


@given(st.lists(LAYERS, max_size=3), LAYERS, CALLS)
def test_adding_a_layer_never_widens(
    layers: list[dict[str, Any]], extra: dict[str, Any], call: tuple[str, dict[str, Any]]
) -> None:
    before = Profile.from_json(layers).check(*call).decision
    after = Profile.from_json(layers).inherit(Layer.from_mapping(extra)).check(*call).decision
    if layers:  # an empty profile is the default "ask", which a first layer replaces
        assert RANK[after] >= RANK[before]


def test_supervise_home_is_not_covered_by_a_bash_prefix(tree: Path) -> None:
    output = tree / "home" / "runs" / "1" / "output.log"
    where = Where(cwd=tree / "w", home=tree / "home", output=output)
    profile = Profile.from_json([{"allow": ["Bash(cat:*)", "Bash(sed:*)", "Bash(tail:*)", "Read"]}])

    def bash(command: str) -> str:
        return profile.check("Bash", {"command": command}, where).decision

    assert bash(f"cat {tree}/home/runs/1/spec.json") == "ask"
    assert bash("sed -i s/a/b/ ../home/runs/1/spec.json") == "ask"
    assert bash('cat "$SUPERVISE_HOME/runs/1/spec.json"') == "ask"
    assert bash(f"tail -n 5 {output}") == bash('tail -n 5 "$SUPERVISE_OUTPUT"') == "allow"
    assert bash("cat sub/x ../outside/y") == "allow"
    assert profile.check("Read", {"path": str(output)}, where).decision == "allow"
    edit = Profile.from_json([{"allow": ["*"]}]).check("Edit", {"path": str(output)}, where)
    assert edit.decision == "deny"


def test_files_that_run_later_are_not_covered_by_a_prefix(tree: Path) -> None:
    w, where = tree / "w", Where(cwd=tree / "w")
    profile = Profile.from_json([{"allow": [f"Edit({w}/:*)", f"Write({w}/.git/config)", "Read"]}])
    for path in (".git/config", ".git/hooks/pre-commit", "sub/.gitattributes", ".bashrc"):
        v = profile.check("Edit", {"path": path}, where)
        assert v.decision == "ask" and "runs later" in v.reason, path
    assert profile.check("Write", {"path": ".git/config"}, where).decision == "allow"  # exact
    assert profile.check("Read", {"path": ".git/config"}, where).decision == "allow"
    assert profile.check("Edit", {"path": ".git/HEAD"}, where).decision == "allow"
