"""ResidencyProbe over a fake /proc: which mappings count, and how pagemap is read."""

import os
import struct

from yeto_otel.proc import PAGE_SIZE, ResidencyProbe

PRESENT = 1 << 63
SWAPPED = 1 << 62


def fake_proc(tmp_path, target, maps_lines, pagemap_entries):
    root = tmp_path / "proc"
    (root / "self").mkdir(parents=True)
    (root / "self" / "maps").write_text("".join(line + "\n" for line in maps_lines))
    data = b"".join(struct.pack("<Q", entry) for entry in pagemap_entries)
    (root / "self" / "pagemap").write_bytes(data)
    return str(root)


def maps_line(start_page, pages, dev, ino, path):
    start, end = start_page * PAGE_SIZE, (start_page + pages) * PAGE_SIZE
    return f"{start:x}-{end:x} r--p 00000000 {dev} {ino}    {path}"


def test_counts_present_pages_of_the_files_mappings_only(tmp_path):
    target = tmp_path / "anchors.pt"
    target.write_bytes(b"x" * PAGE_SIZE * 4)
    st = os.stat(target)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    entries = [PRESENT, 0, PRESENT, SWAPPED,          # pages 0-3: the file, 2 present
               PRESENT, PRESENT,                        # pages 4-5: another file
               0, PRESENT]                              # pages 6-7: the file again, 1 present
    root = fake_proc(tmp_path, target, [
        maps_line(0, 4, dev, st.st_ino, target),
        maps_line(4, 2, dev, st.st_ino + 1, tmp_path / "other"),
        maps_line(6, 2, dev, st.st_ino, target),
    ], entries)
    residency = ResidencyProbe(target, proc_root=root).measure()
    assert residency.mappings == 2
    assert residency.bytes_mapped == 6 * PAGE_SIZE
    assert residency.bytes_touched == 3 * PAGE_SIZE


def test_overlay_style_inode_mismatch_falls_back_to_the_path(tmp_path):
    # On overlayfs, maps may show the backing file's device and inode.
    target = tmp_path / "anchors.pt"
    target.write_bytes(b"x" * PAGE_SIZE)
    root = fake_proc(tmp_path, target, [maps_line(0, 2, "00:99", 12345, target)],
                     [PRESENT, PRESENT])
    residency = ResidencyProbe(target, proc_root=root).measure()
    assert (residency.mappings, residency.bytes_touched) == (1, 2 * PAGE_SIZE)


def test_a_deleted_file_of_the_same_name_does_not_count(tmp_path):
    target = tmp_path / "anchors.pt"
    target.write_bytes(b"x" * PAGE_SIZE)
    root = fake_proc(tmp_path, target, [maps_line(0, 1, "00:99", 12345, f"{target} (deleted)")],
                     [PRESENT])
    residency = ResidencyProbe(target, proc_root=root).measure()
    assert (residency.mappings, residency.bytes_mapped) == (0, 0)


def test_no_proc_is_reported_not_raised(tmp_path):
    target = tmp_path / "anchors.pt"
    target.write_bytes(b"x")
    probe = ResidencyProbe(target, proc_root=str(tmp_path / "nowhere"))
    assert probe.measure() is None
    assert "FileNotFoundError" in probe.error


def test_missing_file_is_reported_not_raised(tmp_path):
    probe = ResidencyProbe(tmp_path / "gone.pt")
    assert probe.measure() is None
    assert "FileNotFoundError" in probe.error


def test_pagemap_scan_and_pread_agree_on_a_real_mapping(tmp_path):
    import mmap as mmap_module

    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(PAGE_SIZE * 64))
    with open(path, "rb") as f:
        mapping = mmap_module.mmap(f.fileno(), 0, prot=mmap_module.PROT_READ)
    try:
        for page in (0, 5, 6, 40):
            mapping[page * PAGE_SIZE]
        scanning = ResidencyProbe(path)
        by_scan = scanning.measure()
        reading = ResidencyProbe(path)
        reading.scan_supported = False
        by_pread = reading.measure()
        assert by_scan == by_pread
        assert by_scan.bytes_mapped == 64 * PAGE_SIZE
        assert 4 * PAGE_SIZE <= by_scan.bytes_touched <= 64 * PAGE_SIZE
        # cached ranges: same answer without rereading /proc/self/maps
        mapping[63 * PAGE_SIZE]
        assert scanning.measure(rescan=False) == scanning.measure()
    finally:
        mapping.close()
    assert ResidencyProbe(path).measure().mappings == 0
