"""Shared STATS.md §12's reference values (delta 1e-6), as printed, for the accountant's tests
and its benchmark."""

REFERENCE = [
    (1, 10**4, "0.2333", "0.0556", "0.0432", "0.0357"),
    (1, 10**5, "0.0753", "0.0162", "0.0124", "0.0101"),
    (1, 10**6, "0.0238", "0.0046", "0.0035", "0.0028"),
    (2, 10**5, "0.1906", "0.0473", "0.0332", "0.0247"),
    (4, 10**4, None, "0.6253", "0.4108", "0.3146"),
    (4, 10**5, "0.5378", "0.1770", "0.1182", "0.0847"),
    (4, 10**6, "0.2016", "0.0518", "0.0343", "0.0240"),
    (8, 10**5, None, "2.357", "1.1766", "1.0101"),
    (8, 10**6, "1.0029", "0.4616", "0.3037", "0.2250"),
]
"""§12's rows: eps0, n, FMT21 closed form (None: "invalid"), FMT21 numerical (step 1), strong
clone, exact lower bound."""

KRR_REFERENCE = [
    (3, 4, 100, "3.999994"),
    (3, 1, 100, "0.584"),
]
"""§13's values of the valid k-RR reduction (the analyst told whether the target's report fell
in the pair): k, eps0, n, central eps. (§12's k-RR rows, Wang et al.'s variation ratio, are
withdrawn by §12's erratum: below the exact value of one pair of batches.)"""
