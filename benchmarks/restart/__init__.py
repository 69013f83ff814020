"""The resume-anchor restart benchmark (benchmarks/restart_anchors.py), by what each part does:

anchor_set  the synthetic anchor set (shard sizes, names, the touched fragment), the same in
            the parent and every child
readings    the children's /proc readings (anonymous memory, AnonPages, VmRSS / VmHWM, smaps)
child       what a child process does: write the files, or restart one variant and measure it
runs        the parent: write the files, warm or drop the page cache, run the children
report      the Markdown tables and the targets
"""
