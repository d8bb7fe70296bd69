"""Every dataset the papers use: official URLs, checksums and where each checksum comes from.

Registered into :mod:`replicate.data.store` on first use. ``data/README.md`` lists the same
entries for people (size, licence, preprocessing, staging by hand). Checksum provenance, one of:

- *published*: by the publisher (TFF's loader source ``simulation/datasets/*.py``; the CIFAR
  page for its archives) or, for CIFAR's individual batches, by torchvision's ``datasets/cifar.py``;
  named beside each entry;
- *computed here*: the SHA-256 of the canonical content, from the offline copies this project
  was built with (MNIST's IDX files, the LEAF JSON, TFF Shakespeare's HDF5 members);
- *pinned on first use*: no checksum was ever published, so the first successful download's
  SHA-256 is recorded in ``data_dir()/checksums.lock`` and every later download must match it.
"""
from __future__ import annotations

from replicate.data.store import Archive, DatasetFiles, FileSpec, register

_TFF = "https://storage.googleapis.com/tff-datasets-public/"
_PINNED = "no published checksum: pinned on first download (data/checksums.lock)"


def _sums(text: str, gzipped: bool = False) -> tuple[FileSpec, ...]:
    """FileSpecs from ``sha256sum`` lines (``HASH  relative/path``)."""
    return tuple(FileSpec(name, digest, gzipped) for digest, name in map(str.split, text.strip().splitlines()))


# LeCun, Cortes & Burges. Checksums of the four uncompressed IDX files (header magic 2051/2049,
# 60,000/10,000 items), computed here: redistributed .gz files are recompressed.
register(DatasetFiles(
    name="mnist",
    files=(
        FileSpec("train-images-idx3-ubyte", "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"),
        FileSpec("train-labels-idx1-ubyte", "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"),
        FileSpec("t10k-images-idx3-ubyte", "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
        FileSpec("t10k-labels-idx1-ubyte", "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
    ),
    mirrors=(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ),
    local_dirs=("mnist",),
    citation="Y. LeCun, C. Cortes, C. J. C. Burges: The MNIST database of handwritten digits.",
    checksums="SHA-256 of the uncompressed IDX files, computed here from the canonical content",
    size="11 MB download, 55 MB staged",
))

# TFF's federated EMNIST-62 (3,400 writers; 671,585 train / 77,483 test images), built by TFF from
# LEAF's by-writer EMNIST: what Charles & Konečný's FEMNIST experiments and Table 3 use. The archive
# SHA-256 is TFF's own (`emnist.py`, load_data(only_digits=False), file_hash, TFF 0.x releases
# before the switch to emnist_all.sqlite.lzma); the two HDF5 members are pinned when first unpacked.
register(DatasetFiles(
    name="emnist_tff",
    files=(FileSpec("fed_emnist_train.h5", None, gzipped=False),
           FileSpec("fed_emnist_test.h5", None, gzipped=False)),
    archives=(Archive("fed_emnist.tar.bz2", (_TFF + "fed_emnist.tar.bz2",),
                      (("fed_emnist_train.h5", "fed_emnist_train.h5"), ("fed_emnist_test.h5", "fed_emnist_test.h5")),
                      sha256="fe1ed5a502cea3a952eb105920bff8cffb32836b5173cb18a57a32c3606f3ea0"),),
    local_dirs=("emnist-tff", "fed_emnist"),
    citation="TensorFlow Federated, tff.simulation.datasets.emnist (from LEAF, Caldas et al. 2018); "
             "G. Cohen et al.: EMNIST (2017).",
    checksums="archive SHA-256 published in TFF's simulation/datasets/emnist.py; members pinned on first unpack",
    size="not recorded here (no copy on the build machine)",
))

# LEAF FEMNIST (Caldas et al. 2018, from NIST SD19) as JSON, produced by LEAF
# `preprocess.sh -s niid --sf 0.05 -k 0 -t sample --tf 0.9`. These are the checksums of the
# shared copy, which is PARTIAL: 20 of the 35 train files survived. No official host serves this
# JSON; LEAF builds it from https://s3.amazonaws.com/nist-srd/SD19/by_class.zip and by_write.zip
# (several GB) with a multi-step pipeline this package does not run (see data/README.md).
register(DatasetFiles(
    name="femnist",
    files=_sums("""
e52c8724a9a3ea3ff3fecc179b3f322efa25fe84a1d712a37ee94586f08123c6  train/all_data_0_niid_05_keep_0_train_9.json
dc687d0b52afc4cb038ba59504f5962217947b58be77708502f27aace6481f9d  train/all_data_10_niid_05_keep_0_train_9.json
927bb8cc27658e539c0781ac39918397b3ad712f42fff8ac687778dfabab2451  train/all_data_16_niid_05_keep_0_train_9.json
9fe910f90e73eb87989f8dbcbab94bd713b1ada05dad8c438f19d0febe4ea5d6  train/all_data_17_niid_05_keep_0_train_9.json
b0acfd82f3e3854d6a105928c46f66c25868b3ae1305488a9e91572dce0396b0  train/all_data_18_niid_05_keep_0_train_9.json
6e3184a7b11c700f89af4a779dcca275796768c48fa84e4e150af7d4bf4db513  train/all_data_19_niid_05_keep_0_train_9.json
e7e9a1b23bc206e1feeb94d4f993d911ed950adc47e92ce52954597197b99c13  train/all_data_1_niid_05_keep_0_train_9.json
46a4e20479468057c9b9462cc60ad2ad48c2b0c000e740d94d4a8310b23715bf  train/all_data_20_niid_05_keep_0_train_9.json
a71f9d0d1ab95b98bb95f20cdcab02097125efab27d9ce341045cb07d565409d  train/all_data_2_niid_05_keep_0_train_9.json
a2438bbf6e17a45d05ea9e28b9c7085dde298e1ed02e00372eee6da8161d6701  train/all_data_31_niid_05_keep_0_train_9.json
8c82d19646fbc0a96483d886c36a3502bdfc657e758c40cae12ee9eef83e3daf  train/all_data_32_niid_05_keep_0_train_9.json
b6f89d29618747d8431396bd2a9d2e54fd2286d1d8939a9b32c72f569d6ffd05  train/all_data_33_niid_05_keep_0_train_9.json
655a68578d2edd76a02f6ee8141e32c5aad079f48d4edeece711b0e04c84c1fc  train/all_data_34_niid_05_keep_0_train_9.json
1623ade048b1c1991d3aa6d5a658dcb67e83fe1def41c2b2647f466f3f3c91db  train/all_data_3_niid_05_keep_0_train_9.json
133facbc92bfaffe3b315a147cd458ca20e3283d3f48882ad72e953c4906e435  train/all_data_4_niid_05_keep_0_train_9.json
2a2b8dccb528033995b0d29ddd953edf002242ed4869c99b23983570b37348de  train/all_data_5_niid_05_keep_0_train_9.json
be03dc6a7fef7197501f75cb25285f03b9dbf6ae0e1367e48d82096da41cb32c  train/all_data_6_niid_05_keep_0_train_9.json
2e1008e286bdb71110e47ab0010edde2d5bcabfb96ba988926481aa401e85532  train/all_data_7_niid_05_keep_0_train_9.json
b72ad0551d01fa0b031f2580aac5bc415f4ffb8613a8cf62048389923d44be90  train/all_data_8_niid_05_keep_0_train_9.json
4c8ed42c941fa95250f21125cf35141b57147cce5063e6acb1bf1d02c7684b8d  train/all_data_9_niid_05_keep_0_train_9.json
979c4ab82ccbc6de67656cfdfc7412900910099014a7c134d64a36347ca6be41  test/all_data_0_niid_05_keep_0_test_9.json
9ed09f6d45455c66d8d442a8451d96d7f53b64e159149a2ccc0931651ae52851  test/all_data_10_niid_05_keep_0_test_9.json
3735eb6c5cf0f4393b4752187c4271a7b6e792f2e6c23c4ace9c503b43cbef5f  test/all_data_11_niid_05_keep_0_test_9.json
8f9439b09a7451e8126564224694b107fc126d693592fd38cb5a8042b32898c6  test/all_data_12_niid_05_keep_0_test_9.json
b3b6db681b6c9309afbad12e51743a822a0e95dfbc0b3409f4780186a9d74d8b  test/all_data_13_niid_05_keep_0_test_9.json
d5f6f40c0fe2ea1eb3a517da22a36ddbb756ce4f8065dd020578102a1d6e665d  test/all_data_14_niid_05_keep_0_test_9.json
32ce99e3a6e9297521e479a3f8de7ceb4135c2d737edbf97e1db7f4170563dcf  test/all_data_15_niid_05_keep_0_test_9.json
b326cd7652b00073ae157e517b6d90e5bd45257bcdf8b6d6781f5e9beafdf628  test/all_data_16_niid_05_keep_0_test_9.json
40b93f70a73598b133443a7c5e332e706d82c2611de7d5cfd6066d2a2a3c9052  test/all_data_17_niid_05_keep_0_test_9.json
fefe2cf9c2f14fdb6cb757774ff841519fed1adf214c786c680492a94d6b63fc  test/all_data_18_niid_05_keep_0_test_9.json
c3f5506ff72efbce185955fb4778d7887389a31c0bb4d9090a08dbcb90101e82  test/all_data_19_niid_05_keep_0_test_9.json
e7dabc622469a0941c32ba03c14ba8c1f2f2c24e03378926f2b4d60a10f5a537  test/all_data_1_niid_05_keep_0_test_9.json
34a4aedc5b4e7a7c88c3ddb2f8f5beff944a5f3619e98a634879de9e509588f6  test/all_data_20_niid_05_keep_0_test_9.json
0e3b90d6f75309f7c333b812d0ba0c5977ec96ec4922561b81bbe6fa968801fe  test/all_data_21_niid_05_keep_0_test_9.json
2af47360f2b706b23fb7bc6364a7f93acc9256db69c642eebb29c412ba82227b  test/all_data_22_niid_05_keep_0_test_9.json
cdb1f00240e26b714225923da6a2fb285868a03c498e785caaffc255c89e6291  test/all_data_23_niid_05_keep_0_test_9.json
68238e36c23cf3b0af30abfbad0c15c197037b0f94126a8261e72aa03b3769bd  test/all_data_24_niid_05_keep_0_test_9.json
dd4a7974c0e85eeb11962cf256961e8e62d473858bba7d1201203bb42f52b126  test/all_data_25_niid_05_keep_0_test_9.json
81814ee722899ca03ffaa2db24a9b68325f614a6150657f3b2f8cef998991355  test/all_data_26_niid_05_keep_0_test_9.json
c89b26290f5d9cc89ecea6bee3dfbcfc433272709e59d4525cdde5d603804f4b  test/all_data_27_niid_05_keep_0_test_9.json
92639bdf4eea5fdaf90ea23c0706e6157e757e204d5aed609ace1b59eaf50ada  test/all_data_28_niid_05_keep_0_test_9.json
c20d153946500cfc4d5cc3b5eab947c670b11c6aa431a30fe4a94f6259585b36  test/all_data_29_niid_05_keep_0_test_9.json
86f292986d0843c50f08d069125f73fddd4fff59a990e6a4c7cc7fff472696b1  test/all_data_2_niid_05_keep_0_test_9.json
8dc95959147a8f3a2f63edbab08a965e986945d1e8288f08411c62166f4ee537  test/all_data_30_niid_05_keep_0_test_9.json
7534a28d664082283e1fd678ced09faf2883b344cc87f12acdc8490c60562ece  test/all_data_31_niid_05_keep_0_test_9.json
83e62e7c499bf1211424b0a38082df3efd80de66f9f2a16a094d8f971f8f6f03  test/all_data_32_niid_05_keep_0_test_9.json
b5eec2f3d839cf2934a9581aaaee94b40bf368fcdf1c918b9107fd67f1fde519  test/all_data_33_niid_05_keep_0_test_9.json
1ccf595d2c2442141ba555cba762d4c72d76d8e7341314e45e7830d196013fe0  test/all_data_34_niid_05_keep_0_test_9.json
99f701d9394a8516a4cb86eb96e3565bf8a405e490ae00487f882419ca86d6fc  test/all_data_3_niid_05_keep_0_test_9.json
2a4c61b74d2efd1dcd6b7eaa6a970ca10da82f6b1f3b419839c6ae314e85b14b  test/all_data_4_niid_05_keep_0_test_9.json
63b48265b8ccae669c770ce7846976dbd62e7b848e9c36563d93a364f0109607  test/all_data_5_niid_05_keep_0_test_9.json
a7ece8a2f53b40671c5a58150d6b7f846bb44003a9b4b8c4628a1973387607ca  test/all_data_6_niid_05_keep_0_test_9.json
a2094cd1048f01072f4a9b8cbff2bd1f69c4e24c03f871e0b23796c19f2f8c97  test/all_data_7_niid_05_keep_0_test_9.json
3939db329891ce9a9b1def83e55af6193eabaa11672344d8129d4a9ab6300e86  test/all_data_8_niid_05_keep_0_test_9.json
09707e362bd5cf273c1948170eb0e3aed4264659b9b7efbb4d7bd0fd38be4b12  test/all_data_9_niid_05_keep_0_test_9.json
"""),
    local_dirs=("femnist-leaf",),
    citation="S. Caldas et al.: LEAF: A Benchmark for Federated Settings (2018); "
             "G. Cohen et al.: EMNIST (2017); NIST Special Database 19.",
    checksums="SHA-256 of the LEAF JSON files, computed here from the (partial) offline copy",
    no_download="no official archive of LEAF's FEMNIST output exists; LEAF builds it from NIST SD19 "
                "(several GB) with its own pipeline, which this package does not run; the offline "
                "copy is partial (20 of 35 train files). emnist_tff is TFF's complete by-writer EMNIST",
    status="partial",
    size="94 MB of JSON (partial copy)",
))

# The Complete Works of Shakespeare, Project Gutenberg etext #100 (January 1994), the file LEAF's
# and FedProx's Shakespeare preprocessing parses. The checksum is of the uncompressed offline copy
# t8.shakespeare.txt (5,458,199 bytes), which MIT OCW serves under that name. FedProx's
# get_data.sh downloads the same etext as Gutenberg's 1994-01-100.zip (member 100.txt); whether
# its bytes equal t8.shakespeare.txt is unverified here: fetch reports both hashes if not.
register(DatasetFiles(
    name="shakespeare",
    files=(FileSpec("t8.shakespeare.txt", "c5601d266987ac885ca96522b1b4e439feb7eca39f0fe1111f7342b63b6468f3",
                    gzipped=False),),
    mirrors=("https://ocw.mit.edu/ans7870/6/6.006/s08/lecturenotes/files/",),
    archives=(Archive("1994-01-100.zip", ("http://www.gutenberg.org/files/100/old/1994-01-100.zip",),
                      (("100.txt", "t8.shakespeare.txt"),)),),
    local_dirs=("shakespeare",),
    citation="W. Shakespeare: The Complete Works, Project Gutenberg etext #100 (1994); "
             "split by speaking role as in LEAF (Caldas et al. 2018).",
    checksums="SHA-256 of the text, computed here from the offline copy; Gutenberg's zip: " + _PINNED,
    size="5.5 MB",
))

# TFF's federated Shakespeare (715 roles; 16,068 / 2,356 snippets). Archive SHA-256 from TFF's
# `shakespeare.py` (load_data, file_hash); member checksums computed here from the offline copy.
register(DatasetFiles(
    name="shakespeare_tff",
    files=(FileSpec("tff/shakespeare_train.h5",
                    "67100f52adfb6d5ece73c1a942b6863731a477bf09421a3c79c9937612895344", gzipped=False),
           FileSpec("tff/shakespeare_test.h5",
                    "55d3a635bffe5c4f71610a8d0cf86c1b369bfd7793e0635b5a83cde1f195689e", gzipped=False)),
    archives=(Archive("shakespeare.tar.bz2", (_TFF + "shakespeare.tar.bz2",),
                      (("shakespeare_train.h5", "tff/shakespeare_train.h5"),
                       ("shakespeare_test.h5", "tff/shakespeare_test.h5")),
                      sha256="0285be9906cb5f268092eee4edeeacfc2af4574f2941f7cc2f08a321d7f5c707"),),
    local_dirs=("shakespeare",),
    citation="TensorFlow Federated, tff.simulation.datasets.shakespeare (from LEAF, Caldas et al. 2018); "
             "S. Reddi et al.: Adaptive Federated Optimization (2020).",
    checksums="archive SHA-256 published in TFF's simulation/datasets/shakespeare.py; members computed here",
    size="6.5 MB staged (two HDF5 files)",
))

# Sent140 (Go, Bhayani & Huang 2009) through LEAF `-s niid --sf 1.0 -k 30 -t sample` (train
# fraction 0.9). Only the TEST split exists in the offline copy; this is its checksum.
register(DatasetFiles(
    name="sent140",
    files=(FileSpec("all_data_niid_0_keep_30_test_9.json",
                    "08257b88eee7fa98f0c9d89d4445348dc06831b03b426b9072b0d64e8b6df4c1", gzipped=False),),
    local_dirs=("sent140-leaf",),
    citation="A. Go, R. Bhayani, L. Huang: Twitter sentiment classification using distant "
             "supervision (2009); LEAF (Caldas et al. 2018).",
    checksums="SHA-256 of the LEAF JSON, computed here from the offline copy",
    no_download="LEAF's Sent140 output is not hosted anywhere; this is the offline LEAF test split "
                "only (the raw tweets are sent140_raw)",
    status="partial",
    size="2.9 MB",
))

# The Sentiment140 training and test CSVs, as LEAF's data/sent140/preprocess/get_data.sh downloads
# them. Stanford publishes no checksum.
register(DatasetFiles(
    name="sent140_raw",
    files=(FileSpec("training.1600000.processed.noemoticon.csv", None, gzipped=False),
           FileSpec("testdata.manual.2009.06.14.csv", None, gzipped=False)),
    archives=(Archive("trainingandtestdata.zip",
                      ("https://cs.stanford.edu/people/alecmgo/trainingandtestdata.zip",
                       "http://cs.stanford.edu/people/alecmgo/trainingandtestdata.zip"),
                      (("training.1600000.processed.noemoticon.csv", "training.1600000.processed.noemoticon.csv"),
                       ("testdata.manual.2009.06.14.csv", "testdata.manual.2009.06.14.csv"))),),
    local_dirs=("sent140", "sent140-raw"),
    citation="A. Go, R. Bhayani, L. Huang: Twitter sentiment classification using distant supervision (2009).",
    checksums=_PINNED,
    size="about 81 MB download",
))

# GloVe 6B 300-d vectors (Pennington, Socher & Manning 2014), the frozen embedding of FedProx's
# Sent140 LSTM (LEAF models/sent140/get_embs.sh). Stanford publishes no checksum.
register(DatasetFiles(
    name="glove",
    files=(FileSpec("glove.6B.300d.txt", None, gzipped=False),),
    archives=(Archive("glove.6B.zip", ("https://nlp.stanford.edu/data/glove.6B.zip",
                                       "https://downloads.cs.stanford.edu/nlp/data/glove.6B.zip"),
                      (("glove.6B.300d.txt", "glove.6B.300d.txt"),)),),
    local_dirs=("glove",),
    citation="J. Pennington, R. Socher, C. D. Manning: GloVe: Global Vectors for Word Representation (2014).",
    checksums=_PINNED,
    size="822 MB download, 1.0 GB staged",
))

# CIFAR-10 / CIFAR-100 python batches (Krizhevsky 2009). The archive MD5s are on the CIFAR page
# (https://www.cs.toronto.edu/~kriz/cifar.html); the per-batch MD5s are torchvision's
# (datasets/cifar.py).
_CIFAR = "https://www.cs.toronto.edu/~kriz/"
_C10 = "cifar-10-batches-py/"
_C10_FILES = (("data_batch_1", "c99cafc152244af753f735de768cd75f"),
              ("data_batch_2", "d4bba439e000b95fd0a9bffe97cbabec"),
              ("data_batch_3", "54ebc095f3ab1f0389bbae665268c751"),
              ("data_batch_4", "634d18415352ddfa80567beed471001a"),
              ("data_batch_5", "482c414d41f54cd18b22e5b47cb7c3cb"),
              ("test_batch", "40351d587109b95175f43aff81a1287e"),
              ("batches.meta", "5ff9c542aee3614f3951f8cda6e48888"))
register(DatasetFiles(
    name="cifar10",
    files=tuple(FileSpec(_C10 + name, None, gzipped=False, md5=md5) for name, md5 in _C10_FILES),
    archives=(Archive("cifar-10-python.tar.gz", (_CIFAR + "cifar-10-python.tar.gz",),
                      tuple((_C10 + name, _C10 + name) for name, _ in _C10_FILES),
                      md5="c58f30108f718f92721af3b95e74349a"),),
    local_dirs=("cifar10", "cifar-10"),
    citation="A. Krizhevsky: Learning Multiple Layers of Features from Tiny Images (2009).",
    checksums="MD5s published: archive on the CIFAR page, batches in torchvision datasets/cifar.py",
    size="163 MB download",
))

_C100 = "cifar-100-python/"
_C100_FILES = (("train", "16019d7e3df5f24257cddd939b257f8d"), ("test", "f0ef6b0ae62326f3e7ffdfab6717acfc"),
               ("meta", "7973b15100ade9c7d40fb424638fde48"))
register(DatasetFiles(
    name="cifar100",
    files=tuple(FileSpec(_C100 + name, None, gzipped=False, md5=md5) for name, md5 in _C100_FILES),
    archives=(Archive("cifar-100-python.tar.gz", (_CIFAR + "cifar-100-python.tar.gz",),
                      tuple((_C100 + name, _C100 + name) for name, _ in _C100_FILES),
                      md5="eb9058c3a382ffc7106e4002c42a8d85"),),
    local_dirs=("cifar100", "cifar-100"),
    citation="A. Krizhevsky: Learning Multiple Layers of Features from Tiny Images (2009).",
    checksums="MD5s published: archive on the CIFAR page, files in torchvision datasets/cifar.py",
    size="161 MB download",
))

# CIFAR-10 re-encoded as JPEG (quality about 75) for this project's offline machines: LOSSY, not
# published anywhere; the offline stand-in when `cifar10` cannot be had. SHA-256 computed here.
register(DatasetFiles(
    name="cifar10_jpg",
    files=(FileSpec("cifar10-jpg.tar.gz", "d877bdec11f54282b92da36e9f045bd305d663b1223e3822baff39ca9ff6690a",
                    gzipped=False),),
    local_dirs=("cifar10-jpg",),
    citation="A. Krizhevsky (2009), re-encoded as JPEG for offline use (lossy).",
    checksums="SHA-256 of the offline tarball, computed here",
    no_download="a lossy JPEG re-encoding made for offline machines; the official data is cifar10",
    status="lossy",
    size="19 MB",
))
