"""A run folder's draws are written to ``draws.nc`` in small blocks (issue 13): the chunk
files are read a block of draws at a time, never whole, and the lazily assembled
InferenceData holds exactly the draws of an in-memory run."""

import tracemalloc

import numpy as np
import pytest

from adaptmc import io
from adaptmc.kernels import HMCParams, hmc
from adaptmc.run import driver, idata, store
from adaptmc.targets.gaussians import gaussian


def test_chunk_files_are_written_and_read_in_pieces(tmp_path):
    rng = np.random.default_rng(0)
    pieces = [{"positions": rng.normal(size=(3, n, 5)), "lp": rng.normal(size=(3, n)),
               "stat/accepted": rng.random((3, n)) < 0.5,
               "stat/n_steps": np.full((3, n), n, np.int32)} for n in (4, 1, 0, 6)]
    whole = store.merge_chunks(pieces)
    path = tmp_path / "chunk.npz"
    io.atomic_savez_concatenated(path, pieces)
    loaded = io.load_npz(path)
    assert loaded.keys() == whole.keys()
    for key, value in whole.items():
        assert loaded[key].dtype == value.dtype
        np.testing.assert_array_equal(loaded[key], value)
        for start, stop in ((0, 11), (3, 8), (10, 11), (5, 5)):
            np.testing.assert_array_equal(io.load_npz_draws(path, key, start, stop),
                                          value[:, start:stop])
    with pytest.raises(ValueError, match="outside"):
        io.load_npz_draws(path, "positions", 2, 12)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="damaged"):
        io.load_npz_draws(path, "stat/n_steps", 0, 11)


def _run(output_dir=None, **kwargs):
    target = gaussian(np.zeros(64), 1.0)
    return driver.run(target, hmc, HMCParams(0.9, 1), num_super_transitions=10,
                      gradient_budget=300, num_chains=3, seed=3, progress=False,
                      output_dir=output_dir, **kwargs)


@pytest.mark.slow  # 12-16 s
def test_draws_from_chunk_files_in_blocks_are_the_in_memory_draws(tmp_path, monkeypatch):
    # blocks of 5 draws of positions: they straddle chunk files and the warm-up boundary
    monkeypatch.setattr(idata, "BLOCK_BYTES", 5 * 3 * 64 * 8)
    on_disk = _run(tmp_path / "run", num_warmup=3, checkpoint_every=4).idata
    in_memory = _run(num_warmup=3).idata
    assert not (tmp_path / "run" / io.CHUNKS).exists()
    for group in ("posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"):
        expected = in_memory[group]
        assert set(on_disk[group].data_vars) == set(expected.data_vars)
        for name, value in expected.data_vars.items():
            assert on_disk[group][name].dims == value.dims
            assert on_disk[group][name].dtype == value.dtype
            np.testing.assert_array_equal(on_disk[group][name].values, value.values)


def test_writing_the_draws_holds_a_block_not_a_chunk(tmp_path, monkeypatch):
    """Traced allocations (NumPy's buffers, Python objects) while ``draws.nc`` is written
    stay near one block (256 KiB here), far below one checkpoint's chunk (9.2 MB; before
    blocks, a chunk was loaded whole: 8.5 MB traced) and all draws (18.4 MB)."""
    monkeypatch.setattr(idata, "BLOCK_BYTES", 2**18)
    peaks = []
    write_draws = store.write_draws

    def traced(run_dir, data, describe=None):
        tracemalloc.start()
        try:
            return write_draws(run_dir, data)  # without the summary: only the writing
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    monkeypatch.setattr(store, "write_draws", traced)
    target = gaussian(np.zeros(256), 1.0)
    for num_super_transitions in (2, 10):  # the first imports and caches what writing needs
        result = driver.run(target, hmc, HMCParams(0.9, 1), gradient_budget=300, num_chains=3,
                            num_super_transitions=num_super_transitions, checkpoint_every=5,
                            progress=False, output_dir=tmp_path / f"run{num_super_transitions}")
    chunk_bytes = 3 * 5 * 300 * 256 * 8
    assert result.idata.posterior["x"].shape == (3, 3000, 256)
    assert peaks[1] < chunk_bytes / 4, f"{peaks[1] / 1e6:.2f} MB traced while writing"
