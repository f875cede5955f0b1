"""A regular (non-editable) install in a fresh virtual environment works and stays inside `decomp`."""
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
