"""``attnas.scale.parallel.map_in_threads``: order, one torch thread per pass, restored thread count."""

from __future__ import annotations

import threading

import pytest
import torch

from attnas.scale.parallel import map_in_threads


@pytest.fixture
def two_torch_threads(restore_torch_threads):
    torch.set_num_threads(2)


def test_results_in_order_from_several_threads_with_one_torch_thread_each(two_torch_threads):
    seen = []

    def fn(i):
        seen.append((threading.get_ident(), torch.get_num_threads()))
        x = torch.randn(64, 64, generator=torch.Generator().manual_seed(i))
        return i, float((x @ x.T).trace())

    expected = []
    torch.set_num_threads(1)
    for i in range(12):
        expected.append((i, float((lambda x: (x @ x.T).trace())(torch.randn(64, 64, generator=torch.Generator().manual_seed(i))))))
    torch.set_num_threads(2)
    assert list(map_in_threads(fn, range(12), 2)) == expected
    assert {n for _, n in seen} == {1}
    assert threading.get_ident() not in {t for t, _ in seen}
    assert torch.get_num_threads() == 2  # restored


def test_one_thread_is_a_plain_map_and_a_lone_item_still_gets_one_torch_thread(two_torch_threads):
    caller = threading.get_ident()
    out = list(map_in_threads(lambda i: (threading.get_ident(), torch.get_num_threads(), i * i), range(3), 1))
    assert out == [(caller, 2, 0), (caller, 2, 1), (caller, 2, 4)]
    ((ident, n, sq),) = list(map_in_threads(lambda i: (threading.get_ident(), torch.get_num_threads(), i * i), [3], 4))
    assert ident != caller and n == 1 and sq == 9  # as in a longer list: scores never depend on the count
    assert list(map_in_threads(lambda i: i, [], 2)) == []


def test_the_caller_keeps_its_thread_count_between_results(two_torch_threads):
    gen = map_in_threads(lambda i: torch.get_num_threads(), range(6), 2)
    for _ in range(6):
        assert next(gen) == 1  # computed with one torch thread
        assert torch.get_num_threads() == 2  # while the caller works between results
    assert torch.get_num_threads() == 2


def test_an_error_propagates_and_the_thread_count_is_restored(two_torch_threads):
    def fn(i):
        if i == 5:
            raise ValueError("item 5 is bad")
        return i

    gen = map_in_threads(fn, range(8), 2)
    assert [next(gen) for _ in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="item 5 is bad"):
        next(gen)
    assert torch.get_num_threads() == 2


def test_an_abandoned_generator_restores_the_thread_count(two_torch_threads):
    gen = map_in_threads(lambda i: i + 1, range(50), 2)
    assert next(gen) == 1
    gen.close()
    assert torch.get_num_threads() == 2
