"""A regular (non-editable) install in a fresh virtual environment works and stays inside `decomp`,
and every bundled program (each entry point of each file `decomp programs` lists) runs from the
installed wheel, outside the checkout: its dry run, and one real row on a fake model."""
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # builds a wheel and a virtual environment


def _run(*args, **kw):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, f"{args}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


_ANYWHERE = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__")


def _not_source(folder: str, names: list[str]) -> set[str]:
    """What the wheel build must not see: tool folders anywhere; tests and run folders at the top."""
    ignored = set(_ANYWHERE(folder, names))
    if Path(folder) == REPO:
        ignored |= {"tests", "runs"} & set(names)
    return ignored


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build a wheel of this checkout and install it into a new virtual environment."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"  # a copy, so the build leaves nothing behind in the checkout
    shutil.copytree(REPO, source, ignore=_not_source)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", root / "dist", source)
    wheel = next((root / "dist").glob("decomp_lang-*.whl"))
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", wheel)
    return env_dir


def test_wheel_installs_one_package_named_decomp(installed):
    site = next(installed.glob("lib/python*/site-packages"))
    top = {p.name for p in site.iterdir()}
    assert "decomp" in top
    assert not top & {"dsl", "runtime", "handlers", "programs", "tests", "benchmarks"}
    assert (site / "decomp" / "grammar.lark").is_file()
    assert (site / "decomp" / "programs" / "decomp" / "prompts" / "split.txt").is_file()
    assert (site / "decomp" / "programs" / "tasklama" / "scorer.npz").is_file()  # S&F's trained scorer
    assert (site / "decomp" / "programs" / "odqa" / "corpus.jsonl").is_file()  # the ODQA corpus and questions
    assert (site / "decomp" / "programs" / "odqa" / "prompts" / "multi_hop.j2").is_file()
    assert not (site / "decomp" / "benchmarks").exists() and not (site / "decomp" / "tests").exists()
    python = installed / "bin" / "python"
    probe = "import importlib.util as u; print(u.find_spec('decomp.benchmarks'))"
    assert _run(python, "-c", probe).strip() == "None"


def test_installed_cli_help_and_a_bundled_program(installed, tmp_path):
    decomp = installed / "bin" / "decomp"
    assert "check" in _run(decomp, "--help")
    answer = _run(decomp, "run", "decomp/letter_cat_symbolic", "-q",
                  'Take the last letters of the words in "Grace Hopper" and concatenate them using a comma.',
                  cwd=tmp_path)
    assert answer.strip() == "e,r"
    assert _run(decomp, "check", "decomp/letter_cat", cwd=tmp_path).strip().endswith(": ok")


# ---------------------------------------------------------------- every bundled program, installed
LETTER_Q = 'Take the letters at position 2 of the words in "Grace Hopper" and concatenate them using a comma.'
REVERSE_Q = 'Reverse the sequence "a, b, c, d".'
TEA = ["Boil water.", "Put a tea bag in a cup.", "Pour the water."]
STEP_ROW = {"id": "t1", "task": "make tea", "assumptions": "there is no kettle"}
GRAPH_ROW = {"id": "g1", "task": "make tea", "steps": TEA}
ORDER = [[0, 1], [0, 2], [1, 2]]  # every step before each later one

# What the fake model answers (`decomp run --model fake:FILE`): the decomposer lines of each
# question (script), the sub-questions' answers (mapping), and a default.
ANSWERS = {
    "none": {},  # a symbolic program calls no model: any call would be an error
    "decomp": {
        "script": {
            LETTER_Q: ['[split] What are the words in "Grace Hopper"?',
                       '(foreach) [str_position] What is the letter at position 2 of "#1"?',
                       "[merge] Concatenate #2 using a comma.", "[EOQ]"],
            REVERSE_Q: ['[first_half] What is the first half of "a, b, c, d"?',
                        '[second_half] What is the second half of "a, b, c, d"?',
                        "[reverse] Reverse the sequence #2.", "[reverse] Reverse the sequence #1.",
                        "[join] Join #3 and #4.", "[EOQ]"],
            'Reverse the sequence "c, d".': ['[reverse_short] Reverse the sequence "c, d".', "[EOQ]"],
            'Reverse the sequence "a, b".': ['[reverse_short] Reverse the sequence "a, b".', "[EOQ]"],
        },
        "mapping": {
            'What are the words in "Grace Hopper"?': '["Grace", "Hopper"]',
            'What is the letter at position 2 of "Grace"?': '"r"',
            'What is the letter at position 2 of "Hopper"?': '"o"',
            'Concatenate ["r", "o"] using a comma.': '"r,o"',
            'What is the first half of "a, b, c, d"?': '"a, b"',
            'What is the second half of "a, b, c, d"?': '"c, d"',
            'Reverse the sequence "c, d".': '"d, c"',
            'Reverse the sequence "a, b".': '"b, a"',
            'Join "d, c" and "b, a".': '"d, c, b, a"',
        },
    },
    "steps": {"default": "1. Boil water.\n2. Put a tea bag in a cup.\n3. Pour the water.\n\nTask: x"},
    # "yes" for each pair in the listed order, "no" (or its reasoning) otherwise
    "graphs": {"mapping": {f"Step A: {TEA[i]}\nStep B: {TEA[j]}": " yes" for i, j in ORDER},
               "default": " no"},
}

# CommaQA-E: a row with its passage (`context`); fine and coarse decompose the same way, with
# their own handlers; the CoT baseline's one line (the script is not used: it is no decomposer)
COMMAQA_Q = "What movies have the directors from Zaggery directed?"
COMMAQA_ROW = {"id": "c1", "question": COMMAQA_Q,
               "context": "movie: Tarnwick ; directed by: Orlaquin. movie: Velloquin ; director: Ysmeralt. "
                          "Orlaquin is from the country of Zaggery. Ysmeralt grew up in the nation of Drossmoor."}
COMMAQA_QA = {"Which people are from the country Zaggery?": '["Orlaquin"]',
              "Which movies did Orlaquin direct?": '["Tarnwick"]'}
ANSWERS["commaqa_fine"] = {"script": {COMMAQA_Q: ["(select) [simp_qa] Which people are from the country Zaggery?",
                                                  "(project_values_flat_unique) [pos_qa] Which movies did #1 direct?",
                                                  "[EOQ]"]}, "mapping": COMMAQA_QA}
ANSWERS["commaqa_coarse"] = {"script": {COMMAQA_Q: ["(select) [qa] Which people are from the country Zaggery?",
                                                    "(project_values_flat_unique) [qa] Which movies did #1 direct?",
                                                    "[EOQ]"]}, "mapping": COMMAQA_QA}
ANSWERS["commaqa_cot"] = {"mapping": {COMMAQA_Q: ' Orlaquin is from Zaggery and directed Tarnwick. So the answer is '
                                                 '["Tarnwick"].'}}
# math: a chain of thought, then the number (by a model, or by a regular expression)
MATH_Q = "Ann has 3 bags of 4 apples. How many apples does she have?"
MATH_COT = "3 * 4 = 12 apples. So the answer is 12."
ANSWERS["math"] = {"mapping": {MATH_Q: " " + MATH_COT, f"Reasoning: {MATH_COT}\nNumber:": " 12"}}
# the chain-of-thought baselines of letter_cat and reverse: one line each, ending with the answer
ANSWERS["decomp_cot"] = {"mapping": {LETTER_Q: ' "Grace" gives "r", "Hopper" gives "o". So the answer is "r,o".',
                                     REVERSE_Q: ' From the last to the first. So the answer is "d, c, b, a".'}}

# open-domain QA: the row names the index folder (built in the working folder from the installed
# corpus by `_prepare`) and K
ODQA_Q = "In which city was the director of the film The Glass Orchard born?"
ODQA_ROW = {"id": "o1", "question": ODQA_Q, "K": 2, "index": "odqa-index"}
ANSWERS["odqa"] = {"script": {ODQA_Q: ["[retrieve_odqa] Who directed the film The Glass Orchard?",
                                       "[retrieve_odqa] In which city was #1 born?", "[multihop_reader] [#1, #2]",
                                       "[EOQ]"]},
                   "mapping": {"Who directed the film The Glass Orchard?": "Mira Calloway",
                               'In which city was "Mira Calloway" born?': "Port Emmerich", ODQA_Q: "Port Emmerich"}}

# a TextCraft task of recipe depth 1: dmax 2 solves it with the symbolic agents
CRAFT_ROW = {"id": "t1", "goal": "oak planks", "dmax": 2,
             "crafting_commands": ["craft 4 oak planks using 1 oak logs", "craft 1 chest using 8 planks"]}
FETCH = {"task": "Fetch 1 oak logs", "success": True, "judge": "symbolic", "reward": 0.0, "stopped": "done",
         "iterations": 1, "actions": ["get 1 oak logs"]}
CRAFT = {"task": "Craft 4 oak planks using 1 oak logs", "success": True, "judge": "symbolic", "reward": 1.0,
         "stopped": "done", "iterations": 1, "actions": ["craft 4 oak planks using 1 oak logs"]}
# the fake model says "task completed" at once: the executor's self-judged success
SAID_DONE = {"task": "craft 1 oak planks", "success": True, "judge": "model", "model_said": "completed",
             "reward": 0.0, "stopped": "the model said completed", "iterations": 1, "actions": []}
ANSWERS["done"] = {"default": "task completed"}

# (program, --main or None for its main, question or row, answers, the answer expected, calls a model)
# the answer `None`: only its shape is checked (llm_scoring's edges depend on the fake's scores)
CASES = [
    ("decomp/letter_cat", None, LETTER_Q, "decomp", "r,o", True),
    ("decomp/letter_cat_llm", None, LETTER_Q, "decomp", "r,o", True),
    ("decomp/letter_cat_symbolic", None, LETTER_Q, "none", "r,o", False),
    ("decomp/reverse", None, REVERSE_Q, "decomp", "d, c, b, a", True),
    ("decomp/reverse_symbolic", None, REVERSE_Q, "none", "d, c, b, a", False),
    ("decomp/letter_cat_cot", None, LETTER_Q, "decomp_cot", "r,o", True),
    ("decomp/letter_cat_cot_rollout", None, LETTER_Q, "decomp_cot", "r,o", True),
    ("decomp/reverse_cot", None, REVERSE_Q, "decomp_cot", "d, c, b, a", True),
    ("decomp/reverse_cot_rollout", None, REVERSE_Q, "decomp_cot", "d, c, b, a", True),
    ("commaqa/fine", None, COMMAQA_ROW, "commaqa_fine", ["Tarnwick"], True),
    ("commaqa/coarse", None, COMMAQA_ROW, "commaqa_coarse", ["Tarnwick"], True),
    ("commaqa/cot", None, COMMAQA_ROW, "commaqa_cot", ["Tarnwick"], True),
    ("commaqa/fine_symbolic", None, COMMAQA_ROW, "commaqa_fine", ["Tarnwick"], True),
    ("math/cot", None, MATH_Q, "math", "12", True),
    ("math/cot_regex", None, MATH_Q, "math", "12", True),
    ("odqa/odqa", None, ODQA_ROW, "odqa", "Port Emmerich", True),
    ("odqa/odqa", "no_decomp", ODQA_ROW, "odqa", "Port Emmerich", True),
    ("odqa/odqa", "no_context", ODQA_ROW, "odqa", "Port Emmerich", True),
    *[("tasklama/steps", name, STEP_ROW, "steps", TEA, True)
      for name in ("icl", "icl_noctx", "multseq", "multseq_noctx", "sf", "sf_noctx", "multseq_sf",
                   "multseq_sf_noctx")],
    ("tasklama/steps", "samples_for_training", STEP_ROW, "steps", [TEA] * 4, True),
    ("tasklama/graphs", "linear", GRAPH_ROW, "graphs", {"steps": TEA, "edges": [[0, 1], [1, 2]]}, False),
    ("tasklama/graphs", "pairwise", GRAPH_ROW, "graphs", {"steps": TEA, "edges": ORDER}, True),
    ("tasklama/graphs", "pairwise_cot", GRAPH_ROW, "graphs", {"steps": TEA, "edges": ORDER}, True),
    ("tasklama/graphs", "llm_scoring", GRAPH_ROW, "graphs", None, True),
    ("adapt/textcraft", None, CRAFT_ROW, "done", SAID_DONE, True),
    ("adapt/textcraft", "react", CRAFT_ROW, "done", SAID_DONE, True),
    ("adapt/textcraft", "plan_execute", CRAFT_ROW, "done", [], True),   # "task completed" is no plan: failed
    ("adapt/textcraft_symbolic", None, CRAFT_ROW, "none", [FETCH, CRAFT], False),
    ("adapt/textcraft_symbolic", "react", CRAFT_ROW, "none",   # one action is not enough: a failed outcome
     {"task": "craft 1 oak planks", "success": False, "judge": "symbolic", "reward": 0.0,
      "stopped": "cannot do it in one action", "iterations": 0, "actions": []}, False),
    ("adapt/textcraft_symbolic", "plan_execute", CRAFT_ROW, "none", [FETCH, CRAFT], False),
]
CASE_IDS = [f"{program}:{main or 'main'}" for program, main, *_ in CASES]
# the soft-prompt tuned programs run on the bundled local model only (tests/programs/
# test_tasklama_spt.py runs them there): from the wheel, a fake model gives the row's clear error
SPT_CASES = [*[("tasklama/steps", f"{method}{variant}", STEP_ROW)
               for method in ("spt", "multseq_spt", "sf_spt", "multseq_sf_spt") for variant in ("", "_noctx")],
             ("tasklama/graphs", "pairwise_spt", GRAPH_ROW)]


def _env() -> dict:
    env = dict(os.environ)  # DECOMP_CACHE_DIR and DECOMP_RUNS_DIR: this test's own (conftest)
    env.pop("PYTHONPATH", None)  # nothing may come from the checkout
    return env


def _decomp(installed, *args, cwd, check=True):
    proc = subprocess.run([str(installed / "bin" / "decomp"), *map(str, args)], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, f"decomp {' '.join(map(str, args))}\n{proc.stdout}\n{proc.stderr}"
    return proc


def _input_args(tmp_path, given) -> list:
    """`-q QUESTION`, or `--input` a one-row JSONL file."""
    if isinstance(given, str):
        return ["-q", given]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(given) + "\n", encoding="utf-8")
    return ["--input", rows]


def _main_args(main) -> list:
    return ["--main", main] if main else []


def _prepare(installed, tmp_path, given) -> None:
    """Build the search index a row names (`index`, a folder of the working folder) from the
    installed ODQA corpus, as the README says: `decomp index build CORPUS --out DIR`."""
    if isinstance(given, dict) and "index" in given:
        site = next(installed.glob("lib/python*/site-packages"))
        _decomp(installed, "index", "build", site / "decomp" / "programs" / "odqa" / "corpus.jsonl",
                "--out", tmp_path / given["index"], cwd=tmp_path)


def test_every_bundled_entry_point_has_a_case(installed, tmp_path):
    """The cases above cover `decomp programs` exactly, and every program of each file that runs on
    the rows its main runs on (tasklama/steps' icl, multseq, sf, ... are all entry points)."""
    names = _decomp(installed, "programs", cwd=tmp_path).stdout.split()
    assert sorted(names) == sorted({program for program, *_ in CASES})
    covered = {(program, main) for program, main, *_ in CASES + SPT_CASES}
    for name in names:
        module = json.loads(_decomp(installed, "check", "--json", name, cwd=tmp_path).stdout)
        params = {p["name"]: {q["name"] for q in p.get("params") or []} for p in module["programs"]}
        target = module["main"]["target"]
        fields = params.get(target, {"question"})
        entries = {n for n, ps in params.items() if ps <= fields and n != target}
        assert (name, None) in covered or (name, target) in covered, f"{name}: its main has no case"
        assert {(name, n) for n in entries} <= covered, f"{name}: {sorted(entries)} need cases"


def test_bundled_programs_load_from_the_installed_wheel(installed, tmp_path):
    site = next(installed.glob("lib/python*/site-packages")).resolve()
    for program in sorted({program for program, *_ in CASES}):
        out = _decomp(installed, "check", program, cwd=tmp_path).stdout.strip()
        assert out == f"{site / 'decomp' / 'programs' / program}.decomp: ok"


@pytest.mark.parametrize("program, main, given", SPT_CASES, ids=[f"{p}:{m}" for p, m, _ in SPT_CASES])
def test_spt_programs_load_their_soft_prompts_from_the_wheel_and_need_the_local_model(installed, tmp_path,
                                                                                       program, main, given):
    """The soft prompts are in the wheel (the program loads, its check reads them); on the fake
    model the row ends with the error that says why, and the run goes on to its summary."""
    fake = tmp_path / "answers.json"
    fake.write_text(json.dumps(ANSWERS["steps"]), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    proc = _decomp(installed, "run", program, "--main", main, "--model", f"fake:{fake}",
                   *_input_args(tmp_path, given), "--output", out, cwd=tmp_path, check=False)
    (row,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert "cannot take a soft prompt (soft_prompt= needs a local: model)" in row["error"], (row, proc.stderr)


@pytest.mark.parametrize("program, main, given, answers, expected, uses_model", CASES, ids=CASE_IDS)
def test_bundled_program_dry_run(installed, tmp_path, program, main, given, answers, expected, uses_model):
    _prepare(installed, tmp_path, given)
    proc = _decomp(installed, "run", program, *_main_args(main), "--dry-run", *_input_args(tmp_path, given),
                   cwd=tmp_path, check=False)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["rows"] == 1 and summary.get("failed", 0) == 0, summary
    assert (summary["estimated_calls"] > 0) == uses_model, summary


@pytest.mark.parametrize("program, main, given, answers, expected, uses_model", CASES, ids=CASE_IDS)
def test_bundled_program_one_real_row_on_the_fake_model(installed, tmp_path, program, main, given, answers,
                                                        expected, uses_model):
    _prepare(installed, tmp_path, given)
    fake = tmp_path / "answers.json"
    fake.write_text(json.dumps(ANSWERS[answers]), encoding="utf-8")
    args = ["run", program, *_main_args(main), "--model", f"fake:{fake}", *_input_args(tmp_path, given)]
    if isinstance(given, str):
        out = _decomp(installed, *args, cwd=tmp_path).stdout
        assert out.strip() == expected
        return
    out = tmp_path / "out.jsonl"
    proc = _decomp(installed, *args, "--run-dir", tmp_path / "run", "--output", out, cwd=tmp_path)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    (row,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert "error" not in row and summary["failed"] == 0, row.get("error")
    assert (summary["calls"] + summary["cache_hits"] > 0) == uses_model, summary
    if expected is not None:
        assert row["answer"] == expected
    else:  # a graph row: the given steps, and edges between them in one direction only
        graph = row["answer"]
        assert graph["steps"] == TEA and graph["edges"]
        assert all(0 <= i < 3 and 0 <= j < 3 and i != j and [j, i] not in graph["edges"]
                   for i, j in graph["edges"])
