"""The LLM travels to a lent GPU machine in parts, one call each: the parts join back into
the same bytes only when every one has come, and a damaged part is refused."""

from __future__ import annotations

import os

import pytest

from bench import gpu_carry


@pytest.fixture
def there(tmp_path, monkeypatch):
    """The GPU machine's /tmp, here."""
    monkeypatch.setattr(gpu_carry, "LLM_THERE", tmp_path / "there" / "gpu-llm")
    return tmp_path / "there"


def test_parts_join_into_the_same_file_once_all_have_come(tmp_path, there) -> None:
    source = tmp_path / "model.gguf"
    source.write_bytes(os.urandom(2_500_000))
    packed = tmp_path / "packed"
    gpu_carry.pack_llm(source, packed, room=1_000_000)
    parts = sorted(p.name for p in packed.glob("part-*"))
    assert parts == ["part-00", "part-01", "part-02"]
    assert all((packed / p).stat().st_size <= 1_000_000 for p in parts)
    for handed, expect_done in ((["part-00", "part-02"], False), (["part-01"], True)):
        call = tmp_path / f"call-{handed[0]}"  # what one call carries: some parts + parts.json
        call.mkdir()
        (call / "parts.json").write_bytes((packed / "parts.json").read_bytes())
        for p in handed:
            (call / p).write_bytes((packed / p).read_bytes())
        joined = gpu_carry.gather_llm(call)
        assert (joined is not None) == expect_done
    assert (joined / "model.gguf").read_bytes() == source.read_bytes()


def test_a_damaged_part_is_refused(tmp_path, there) -> None:
    source = tmp_path / "model.gguf"
    source.write_bytes(os.urandom(300_000))
    packed = tmp_path / "packed"
    gpu_carry.pack_llm(source, packed, room=200_000)
    damaged = bytearray((packed / "part-01").read_bytes())
    damaged[7] ^= 0xFF
    (packed / "part-01").write_bytes(bytes(damaged))
    with pytest.raises(SystemExit, match="sha256"):
        gpu_carry.gather_llm(packed)
    assert not (there / "gpu-llm" / "model.gguf").exists()
