"""The subcommand registry: every module of accelsim/commands declares one Command and COMMANDS lists each once;
`accelsim` declares them in that order, and a command added to the list is listed, described and run."""
import pkgutil
from pathlib import Path

import pytest

import accelsim.commands as commands
from accelsim.cli import build_parser, main
from accelsim.commands.command import Command

HELP_ORDER = ["run", "eval", "export", "map", "cosim", "compare", "train", "plan", "ops", "collective", "archs", "arch",
              "models", "explain", "sweep", "validate"]


def test_every_command_module_is_listed_once_in_order():
    modules = {m.name for m in pkgutil.iter_modules([str(Path(commands.__file__).parent)])} - {"command"}
    assert sorted(c.name for c in commands.COMMANDS) == sorted(modules)
    assert [c.name for c in commands.COMMANDS] == HELP_ORDER


def test_the_main_help_lists_each_command_with_its_line(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = "".join(capsys.readouterr().out.split())      # wrapped anywhere, at a hyphen too
    positions = [text.index(c.name + "".join(c.help.split())) for c in commands.COMMANDS]
    assert positions == sorted(positions)


def test_a_command_added_to_the_list_is_described_and_run(monkeypatch, capsys):
    ran = []

    def add(parser):
        parser.add_argument("--times", type=int, default=1, help="how many times")

    hello = Command("hello", "say hello", add, lambda args: ran.append(args.times) or 0)
    monkeypatch.setattr(commands, "COMMANDS", (*commands.COMMANDS, hello))
    assert main(["hello", "--times", "3"]) == 0 and ran == [3]
    with pytest.raises(SystemExit):
        main(["hello", "--help"])
    assert capsys.readouterr().out.splitlines()[2] == "say hello"


def test_a_costly_command_declares_its_actions_only_when_asked():
    def actions(argv):
        validate = build_parser(argv)._subparsers._group_actions[0].choices["validate"]
        return set(validate._subparsers._group_actions[0].choices)

    assert actions(["run", "--help"]) == set() and actions(["validate", "score", "x"]) == {"score", "cuda", "onnx",
                                                                                           "cpu"}
