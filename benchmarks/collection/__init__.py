"""The census collection benchmark (benchmarks/census_collection.py), by what each part does:

variants  the SDK variants (census, psutil anchors A and B, SDK only) and their sanity checks
raw       the variants without the SDK (reads, parsing, psutil calls)
mappings  many separate file mappings, to time the census in a process with ~2000 more VMAs
timing    interleaved rounds, medians and ratios; the cProfile mode
report    the Markdown tables
"""
