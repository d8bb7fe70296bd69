"""The twelve figures whose paper data this machine holds only as offline stand-ins (issue #39: partial LEAF
FEMNIST and Sent140 copies, a JPEG CIFAR-10). `make test` runs their notebooks once, on fabricated official
downloads (tests/test_official_data_e2e.py); the nbval pass leaves them to it (``--notebooks-on-official-data``,
tests/conftest.py). tests/test_data_variants.py checks the stand-in switch on the same list."""
FIGURES = ("charles2021/fig6", "charles2021/fig12", "charles2021/fig13", "charles2021/table3",
           "fedprox2020/table1", "fedprox2020/fig2", "fedprox2020/fig3", "fedprox2020/fig4",
           "fedprox2020/stragglers", "khanduri2021/fig2", "khanduri2021/fig3", "khanduri2021/fig4")
