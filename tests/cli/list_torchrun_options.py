#!/usr/bin/env python3
"""Lists the options of torchrun's parser (torch/distributed/run.py, get_args_parser) without importing torch.

Usage: list_torchrun_options.py RUN_PY
Prints one line per option: DEST<TAB>KIND<TAB>PET<TAB>SPELLINGS (comma-separated).
KIND is "flag" (no value: action=check_env/store_true) or "value"; PET is "pet" when the option reads PET_<DEST>
(action=env or check_env), else "-".
Reads the source with the ast module, so it works for any torch version's run.py on any Python 3.
"""
import ast
import sys


def literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def main(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    parser_fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_args_parser")
    for call in ast.walk(parser_fn):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        names = [literal(a) for a in call.args]
        if not names or not all(isinstance(n, str) for n in names) or not names[0].startswith("-"):
            continue  # the positional training_script / training_script_args
        keywords = {k.arg: k.value for k in call.keywords}
        longs = [n for n in names if n.startswith("--")]
        dest = literal(keywords["dest"]) if "dest" in keywords else longs[0][2:].replace("-", "_")
        action = keywords.get("action")
        action_name = action.id if isinstance(action, ast.Name) else literal(action) if action is not None else None
        kind = "flag" if action_name in ("check_env", "store_true") else "value"
        pet = "pet" if action_name in ("env", "check_env") else "-"
        print("\t".join([dest, kind, pet, ",".join(names)]))


if __name__ == "__main__":
    main(sys.argv[1])
