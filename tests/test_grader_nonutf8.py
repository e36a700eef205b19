"""A folder name that is not UTF-8 (red team R14, issue 35).

An archive made on a Chinese Windows unzips its folder names in GBK: on Linux such a name is bytes that are
not UTF-8, and Python reads it with surrogates in it. Each case's seed hashes the student's name, and
hashing encoded it strictly: UnicodeEncodeError, and an honest student got 0 / 5.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys

import grader_fixtures as gf
import pytest

from utils.grading.unit import case_seed

GBK_NAME = "张伟".encode("gbk")  # b"\xd5\xc5\xce\xb0": not UTF-8


def test_a_case_seed_takes_a_name_that_is_not_utf8_and_keeps_utf8_names_seeds():
    name = os.fsdecode(GBK_NAME)
    assert case_seed(7, "ch2.x", name) == case_seed(7, "ch2.x", name)
    assert case_seed(7, "ch2.x", name) != case_seed(7, "ch2.x", os.fsdecode(b"\xd5\xc5\xce\xb1"))
    assert case_seed(7, "ch2.x", "\ud800") >= 0  # a lone surrogate of any kind encodes
    # a UTF-8 name's seed is what it always was (results graded before this change reproduce)
    assert case_seed(7, "ch2.x", "张伟") == int.from_bytes(
        __import__("hashlib").sha256("grade:7:ch2.x:张伟".encode()).digest()[:6], "big")


@pytest.mark.sandbox
def test_an_honest_notebook_in_a_gbk_folder_gets_full_marks(tmp_path):
    solution = next(path for path in gf.course_notebooks() if path.name.startswith("02_"))
    subs = tmp_path / "subs"
    folder = os.path.join(os.fsencode(subs), GBK_NAME)
    os.makedirs(folder)
    shutil.copy(solution, os.path.join(folder, os.fsencode(solution.name)))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "utils.grade", str(subs), "--out", str(out), "--chapters", "2",
                           "--seed", "7", "--jobs", "1"], cwd=gf.REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out / "results.csv", newline="", encoding="utf-8", errors="surrogateescape") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and all(r["status"] == "passed" for r in rows), [(r["exercise"], r["status"], r["feedback"])
                                                                  for r in rows if r["status"] != "passed"]
