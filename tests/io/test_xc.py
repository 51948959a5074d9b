"""The XC / multi-label svmlight reader: values against scikit-learn's loader, chunks,
and every bad input naming the file and line."""


import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from onebit_dask.io.xc import XCFormatError, iter_xc, read_xc, xc_sizes
from tests.support.helpers import FILES



def _lines(name):
    return (FILES / name).read_text().splitlines(keepends=True)


def _reference(path, d1, d2):
    """Dense ``(X, Y)`` by scikit-learn's loader on the body, labels one-hot by hand."""
    X, labels = load_svmlight_file(str(path), multilabel=True, zero_based=True, offset=1,
                                   n_features=d1)
    Y = np.zeros((X.shape[0], d2), dtype=np.int8)
    for i, row in enumerate(labels):
        Y[i, [int(v) for v in row]] = 1
    return X.toarray(), Y


@pytest.mark.parametrize("name, shape", [("bibtex_train.txt", (300, 1836, 159)),
                                         ("emotions_test.txt", (150, 72, 6))])
def test_read_xc_equals_sklearn_loader(name, shape):
    n, d1, d2 = shape
    X, Y = read_xc(FILES / name)
    assert X.shape == (n, d1) and Y.shape == (n, d2)
    assert X.format == "csr" and X.dtype == np.float64 and Y.dtype == np.int8
    X_ref, Y_ref = _reference(FILES / name, d1, d2)
    np.testing.assert_array_equal(X.toarray(), X_ref)
    np.testing.assert_array_equal(Y.toarray(), Y_ref)
    assert Y.sum() > n  # several labels per instance
    assert xc_sizes(FILES / name) == (n, d1, d2, True)


def test_plain_svmlight_without_header(tmp_path):
    body = _lines("emotions_train.txt")[1:]
    path = tmp_path / "plain.svm"
    path.write_text("".join(body))
    X, Y = read_xc(FILES / "emotions_train.txt")
    X2, Y2 = read_xc(path)
    d1 = X.indices.max() + 1
    assert X2.shape == (300, d1) and Y2.shape == (300, Y.indices.max() + 1)
    np.testing.assert_array_equal(X2.toarray(), X.toarray()[:, :d1])
    X3, Y3 = read_xc(path, n_features=72, n_labels=6)
    assert (X3 != X).nnz == 0 and (Y3 != Y).nnz == 0
    assert xc_sizes(path, n_labels=6) == (300, d1, 6, False)


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 1000])
def test_chunks_equal_the_whole_file(chunk_rows, tmp_path):
    X, Y = read_xc(FILES / "bibtex_test.txt")
    chunks = list(iter_xc(FILES / "bibtex_test.txt", chunk_rows))
    assert all(c[0].shape[0] == chunk_rows for c in chunks[:-1])
    assert (sp.vstack([c[0] for c in chunks]) != X).nnz == 0
    assert (sp.vstack([c[1] for c in chunks]) != Y).nnz == 0
    # without the header: a first pass finds d1 and d2, chunks have the same width
    path = tmp_path / "plain.svm"
    path.write_text("".join(_lines("bibtex_test.txt")[1:]))
    X2, Y2 = read_xc(path)
    chunks = list(iter_xc(path, chunk_rows))
    assert {c[0].shape[1] for c in chunks} == {X2.shape[1]}
    assert (sp.vstack([c[0] for c in chunks]) != X2).nnz == 0
    assert (sp.vstack([c[1] for c in chunks]) != Y2).nnz == 0


def test_blank_lines_comments_and_empty_label_sets(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text("3 4 5\n1,4 0:1.5 3:2\n\n 1:-1 # no label\n# a comment line\n2 2:0.25\n")
    X, Y = read_xc(path, chunk_rows=2)
    np.testing.assert_array_equal(X.toarray(), [[1.5, 0, 0, 2], [0, -1, 0, 0], [0, 0, 0.25, 0]])
    np.testing.assert_array_equal(Y.toarray(), [[0, 1, 0, 0, 1], [0] * 5, [0, 0, 1, 0, 0]])
    path.write_text("3 4 5\n1 0:1\n\n 1:1\n4 0:1 2:x\n")
    with pytest.raises(XCFormatError, match=r"small\.txt:5: malformed line"):
        read_xc(path)  # the line number counts the blank line


def _write_bad(tmp_path, line_no, text, name="bad.txt"):
    lines = _lines("bibtex_train.txt")
    lines[line_no - 1] = text + "\n"
    path = tmp_path / name
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize("text, match", [
    ("3,x 0:1", "malformed line '3,x 0:1'"),
    ("3 0:1 7", "malformed line"),
    ("3 5:1 2:1", "malformed line"),
    ("3 0:1 1836:1", "feature index 1836 is out of range: .* 0..1835"),
    ("3,159 0:1", "label 159 is out of range: .* 0..158"),
    ("-1 0:1", "label -1 is out of range"),
    ("2.5 0:1", "label 2.5 is out of range"),
    ("3,3 0:1", "label 3 is repeated"),
    ("3 0:nan", "feature 0 has the value nan"),
])
@pytest.mark.parametrize("line_no", [2, 251])
def test_bad_line_names_file_line_and_value(tmp_path, text, match, line_no):
    path = _write_bad(tmp_path, line_no, text)
    with pytest.raises(XCFormatError, match=rf"bad\.txt:{line_no}: {match}"):
        read_xc(path)
    with pytest.raises(XCFormatError, match=rf"bad\.txt:{line_no}: {match}"):
        list(iter_xc(path, 100))


def test_header_count_mismatch_and_empty_file(tmp_path):
    lines = _lines("emotions_test.txt")
    path = tmp_path / "short.txt"
    path.write_text("".join(lines[:-1]))
    with pytest.raises(XCFormatError, match="declares 150 instances but the file has 149"):
        read_xc(path)
    path.write_text("".join(lines + lines[1:2]))
    with pytest.raises(XCFormatError, match="declares 150 instances but the file has more"):
        read_xc(path)
    for text in ("", "\n\n", "10 72 6\n"):
        path.write_text(text)
        with pytest.raises(XCFormatError, match=r"short\.txt: the file is empty"):
            read_xc(path)
    path.write_text("1 0 6\n 0:1\n")
    with pytest.raises(XCFormatError, match=r"short\.txt:1: the header '1 0 6'"):
        read_xc(path)


def test_bad_arguments():
    assert issubclass(XCFormatError, ValueError)  # the CLI's bad input: exit 2
    with pytest.raises(ValueError, match="n_features=10 is not allowed: the header .* 1836"):
        read_xc(FILES / "bibtex_train.txt", n_features=10)
    with pytest.raises(ValueError, match="chunk_rows=0 is not allowed"):
        iter_xc(FILES / "bibtex_train.txt", 0)  # checked when called, not when iterated
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_xc(FILES / "nope.txt")


def test_plain_svmlight_checked_against_the_arguments(tmp_path):
    path = tmp_path / "plain.svm"
    path.write_text("1,2 0:1 5:2\n3 7:1\n")
    with pytest.raises(XCFormatError, match=r"plain\.svm:2: feature index 7 is out of range: "
                                            r".* 0\.\.6"):
        read_xc(path, n_features=7)
    with pytest.raises(XCFormatError, match=r"plain\.svm:2: label 3 is out of range: .* 0\.\.2"):
        list(iter_xc(path, 1, n_labels=3))
    X, Y = read_xc(path, n_features=8, n_labels=4)
    assert X.shape == (2, 8) and Y.shape == (2, 4)


@pytest.mark.parametrize("header", ["300 72", "-5 72 6", "300 72 6 1"])
def test_a_header_that_is_not_three_counts_is_called_a_header(tmp_path, header):
    """Whitespace-separated numbers alone on the first line are a header, never an
    instance: a wrong one is reported as the header, not as a malformed instance."""
    path = tmp_path / "h.txt"
    path.write_text(f"{header}\n0 0:1\n1 1:2\n")
    with pytest.raises(XCFormatError, match=rf"h\.txt:1: the header '{header}' is not three "):
        read_xc(path)
