"""`decomp tune` as a command: `decomp run` never loads torch, transformers or peft (the tune
command is registered, not imported with them), and a slow run on the real bundled model."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from decomp.handlers.soft_prompts import read_soft_prompt  # noqa: E402
from tests.learning.tuning.tuning_helpers import setup_files  # noqa: E402

HEAVY = ("torch", "transformers", "peft")


def test_decomp_run_imports_no_torch_transformers_or_peft(tmp_path):
    program = tmp_path / "p.decomp"
    program.write_text('handler ask = prompt(text="Q: a?\\nA: 1\\n")\nmain ask\n')
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"mapping": {"What is 2+2?": " 4"}}))
    script = ("import sys\nfrom decomp.runtime.cli import main\n"
              "try:\n    main(sys.argv[1:])\nexcept SystemExit as end:\n    assert not end.code, end.code\n"
              f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n")
    proc = subprocess.run([sys.executable, "-c", script, "run", str(program), "--model", f"fake:{answers}",
                           "-q", "What is 2+2?"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["4", "[]"]


def test_the_help_lists_tune():
    from click.testing import CliRunner

    from decomp.runtime.cli import main

    result = CliRunner().invoke(main, ["tune", "--help"])
    assert result.exit_code == 0 and "--validation-split" in result.output and "--max-seconds" in result.output


@pytest.mark.slow
@pytest.mark.timeout(300)  # loads the bundled 270M model in torch and trains it on the CPU: 43 s on a loaded 2-core machine
def test_tune_trains_two_steps_on_the_bundled_model(tmp_path):
    pytest.importorskip("llama_cpp")
    program, data = setup_files(tmp_path)
    out = tmp_path / "capital.safetensors"
    proc = subprocess.run([sys.executable, "-m", "decomp", "tune", str(program), "--handler", "capital", "--input",
                           str(data), "--query", "question", "--out", str(out), "--max-steps", "2", "--batch-size",
                           "2", "--threads", "2", "-q"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{out}: 8 virtual tokens, validation loss ")
    soft = read_soft_prompt(out)
    assert soft.embeddings.shape == (8, 640) and soft.meta["base_model"]["hidden_size"] == 640
    assert soft.meta["training"]["steps"] == 2 and soft.meta["training"]["stopped"] == "max_steps"
    assert soft.meta["training"]["options"]["input"] == str(Path(data))


def test_progress_off_a_terminal_is_one_line_per_step(capsys):
    """In a log file a bar redrawn in place shows nothing until the end: each step is a line."""
    from decomp.learning.tuning.command import _progress

    with _progress(quiet=False) as update:
        update(8, 1, 30, 2.5)
        update(8, 2, 30, 2.25)
    assert capsys.readouterr().err.splitlines() == ["8 tokens: step 1/30, loss 2.5000",
                                                   "8 tokens: step 2/30, loss 2.2500"]
    with _progress(quiet=True) as update:
        assert update is None
