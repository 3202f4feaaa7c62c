"""The bAbI v1.2 archive's English folders extracted, each file checked against a pinned sha256 (`data/catalog.py`
fetches the archive)."""

from __future__ import annotations

import hashlib
import logging
import tarfile
from pathlib import Path, PurePosixPath

from attnmem.core.atomic import replacing
from attnmem.core.errors import UserError

log = logging.getLogger(__name__)

ARCHIVE_ROOT = "tasks_1-20_v1-2"
FOLDERS = ("en", "en-10k")  # the only members extracted

# sha256 of the v1.2 training files, by path inside the archive's root (10k task 3 is not pinned: no trusted copy).
_TRAIN_SHA256 = {
    f"{folder}/{stem}_train.txt": digest
    for folder, table in (("en", """
qa1_single-supporting-fact c64ba9b1a49bbb111ffc4cd2ae4f129d25c012399dd7ade9679eea464b9afb05
qa2_two-supporting-facts a4978af5bc0dc30191810e7c9949aaa6eae939ed0f6beb9fcb5f4330c2a27860
qa3_three-supporting-facts a6e78019f36a02a7ed71fe6aaded0b563ff09c8deec392931801fcd9c6af4d60
qa4_two-arg-relations c9370502d85fa382f32d1fea2111e817f81ae9e3e79eb2924a1a5392a90417fa
qa5_three-arg-relations 086cd59c3ca9677bfac3d6a22ca5853c76a5c1fbae3159c7c4a6aef759a74ec0
qa6_yes-no-questions 5a133115ee35d475776df703ff605d145b11effbcdbf7e74861f9d5639246a5a
qa7_counting dca03bd91876951c49f1c971c83c9dd55404de60201b7b6435451cf7ddb4751c
qa8_lists-sets 058604df6f9440458317e8ae685d2b7b84261e1a80b4d6410a9140d16f81bf06
qa9_simple-negation 0c3b89921af0caea1c4059ee3f7b7f2a88869f924195a428da37820446b8c49f
qa10_indefinite-knowledge 0b7691689447bab05476c5b48c44999b41e747c3978df69c18fdd87b60d6e8b3
qa11_basic-coreference 9468de9a1f256f43dfda693a5d07182d21149a82b65f7c2451c64e9cff5eb138
qa12_conjunction 45c2764bb2d3c8f699d35e9d9aa7958fcd96379c6e907116cdf74526c108bb25
qa13_compound-coreference 533a391edbda743e4c99504de88b40cdded5b1d5ef454d1390f0863f748a4cc9
qa14_time-reasoning b7561cbc624205c9c2fdbb8c843cfa8ad90edd65e78bb223fc6dea8113662df8
qa15_basic-deduction e856ebfdcce4dd7d617c1d10f985e96a0850c0ca18e9a19a017cb710d135ed3d
qa16_basic-induction 20121005137e3d4b061a086eb177a456303d5742b764eb8da2d0e480b6af4d28
qa17_positional-reasoning 20083bf56ff74f0e7cf5e3e2f8c3905cdb8ef09293c3e8cf7a96ed8b45ae2277
qa18_size-reasoning 18b7dcf52c9a0e87e4e7dd3d65b7e5a630de039645f52a1294197af7481d739d
qa19_path-finding dcb788352a56effb7bea1449128f31cc9c342c8c327b6df2caeee0e379e6ad3a
qa20_agents-motivations 29580ad55fb7b4b29ba014696056cc68f8f347dac3be88470fd692ad60150398
"""), ("en-10k", """
qa1_single-supporting-fact 749ea9f7c99070feb2d88c975a254417a0dcc8274add4435ae5ae24c7afc7e9d
qa2_two-supporting-facts d4074c0c5d54f70ce2f538056ce2b6ef6a313da336da4245f1a24f1298e37ef3
qa4_two-arg-relations 5d11b821d35234988ab907866aa7ce718e6b6d751acf63bdef52262afb59f12c
qa5_three-arg-relations 2506910935b701bac64fc8b1d7ff12bd8d0f47ceefca183454282bec784c12a5
qa6_yes-no-questions 602f379184bf3cb59660d0f7769d9c94ccdc1fc4d82dfe90bd460d985b1ff0c5
qa7_counting 4a2508733bef9b38cfce4b3108a91b83cdee378de4a7370e4d32fea2dacd3b7d
qa8_lists-sets 9518da2d3aa5d98bec33335e0d5ba3a22c2bd1929ee679085d37eb50a7652e4a
qa9_simple-negation 5f8949f6ef7d64516fc4dd5732b12b5932d057b1a614e8ac94e795fb020d4ff0
qa10_indefinite-knowledge c5c0788b0446095c07a0442784cad2b59c1d58e875ebe8ad852f5e3f628613f4
qa11_basic-coreference edfcd97fecd4a5045af25e1790cf1408856ae362c39521b1b69cd32b88ec0ced
qa12_conjunction 39d58df3564916c66cebc98befb65d605c032181e51208730fd8837a77bc166a
qa13_compound-coreference c530fdf122d26617a8a03ba5cdbacee87c22624ba7f50d1f07f9658c900e22d8
qa14_time-reasoning c322e0814eef71f088af1aa1334e7ae4b1ee6ca18f2ee94c05e2189226964ed6
qa15_basic-deduction 0a86673f7fafa484f8ee394048f03de19405bdc40b58f21086969efad2862010
qa16_basic-induction 27fef347ce0b25dd148efea2b15f154926e0e9069d4ea6ab9cfca3add492ab35
qa17_positional-reasoning 8a383651e009db50d6c9effed5778b8646c28c55fadb1592b5f4d8d3a187bbce
qa18_size-reasoning 9e7c15107067d2070170ef12579a8bfe34dfc35a7ac9ebd13f2001dc1a7488f9
qa19_path-finding 6cfdc6f448e3cf0e3d8a390fa3add461935b033f89ede32aeef30812401ec91e
qa20_agents-motivations 36f20f3baf6bad2297d5b9fd877e633550c36106fe78bc10ddfb7b1eede62573
"""))
    for stem, digest in (line.split() for line in table.strip().splitlines())
}
# The test files are byte-identical in en/ and en-10k/, so one table, by file name, serves both.
_TEST_SHA256 = {f"{stem}_test.txt": digest for stem, digest in (line.split() for line in """
qa1_single-supporting-fact 55acf66cef2f6d798e2aa1d056e1ec8f24e910ea9215b639450574321132959b
qa2_two-supporting-facts eff93fb9cd81ba02eb765772cf7cc269769ed44ec71cbbbc19cfb16ee5eba0f6
qa3_three-supporting-facts 17795c977100baf8188f386522ae301b62d6c1a13efc01b3aea781e588b4d57f
qa4_two-arg-relations 07f0ca18ddeea9eed4ba6d59e162adcb0ce44815721114b3540d92825509331e
qa5_three-arg-relations ec825c1c8a76e63a31f0d7a7763cd63740e98332fa9bdf246a19068949bd5f97
qa6_yes-no-questions b108b16f1eccbd1c24df6dca2649079a7b2f10af7fd12d4c45a3393802de59e3
qa7_counting a74d1f2b91329b2bae814d41cdac2fbdfdf0328562b7d8afa9a0fa576d461e27
qa8_lists-sets 362a653c821a580fa315a85243b4f03bfa06fa7e0269b6f8e596f8fe6911646a
qa9_simple-negation 63590aff3f89993db409f0e9a9eb39c2a5b9d5efff99b255d800a891b0044d9f
qa10_indefinite-knowledge fde8f20ed0b3ba979058ed391a566af34653f23baab5b2793ee37f87ef4e88b7
qa11_basic-coreference 46f3290d0158ce1285a40cd2d793f5a65f86ae5000226e165cbc85a3dfeb2f6f
qa12_conjunction 6437718f8f9801ce345869e910b896836cdc6fd2d01dc7b4d2df49730703b4b1
qa13_compound-coreference 76a25b684f23c9cc473d8cd1465506168b9a1ec8891cfc59d0bbd87e6a064990
qa14_time-reasoning e3f0b19858ffbec3ed1e49076cc4d1295a89ce146c50318b862f13f202b3caf2
qa15_basic-deduction 32b77e117fe9acf5f94906684e3b5206de0108e646c76e1da3e022896ec7ee94
qa16_basic-induction 4a11e55366f2a5a859b5a81f683ee23801bdbe71ef984e51adb976bd053e8dcf
qa17_positional-reasoning 9e1e0250ed4ec1831757fab26c04138f81ea557ebf6976a220db879cbed04bac
qa18_size-reasoning d34f70eb7228a276fcb3a7854174fe562c5634f4fb454a39fc3d1ad9934be3ef
qa19_path-finding 023e391f0d7f79c9e6ae1c46c093e2d0dbd50ab8fbd8965e037a75e3614c20e5
qa20_agents-motivations bd3bde3788ac14ba0ae095078f7b820fbd2bfa6a34dba9d1d46a34afde9c2729
""".strip().splitlines())}


def pinned_sha256(relative: str) -> str | None:
    """The pinned sha256 of `en/...` or `en-10k/...` inside the archive's root, None when not pinned."""
    return _TRAIN_SHA256.get(relative) or _TEST_SHA256.get(PurePosixPath(relative).name)


def extract_babi(archive: Path, root: Path) -> list[Path]:
    """Extract `en/` and `en-10k/` from the archive into `root`, refusing unsafe paths and files of the wrong sha256."""
    verified: dict[str, bytes] = {}  # checked all first, so a bad archive leaves nothing half-written
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            parts = PurePosixPath(member.name).parts
            if member.name.startswith(("/", "\\")) or ".." in parts or any("\\" in p or ":" in p for p in parts):
                raise UserError(f"{archive}: refusing the unsafe path {member.name!r}")
            if len(parts) != 3 or parts[0] != ARCHIVE_ROOT or parts[1] not in FOLDERS or not member.isfile():
                continue  # other languages, shuffled/ and any link are not needed: never extracted
            relative = f"{parts[1]}/{parts[2]}"
            file = tar.extractfile(member)
            assert file is not None  # a regular file (isfile above)
            data = file.read()
            digest, expected = hashlib.sha256(data).hexdigest(), pinned_sha256(relative)
            if expected is None:
                log.warning("%s has no pinned sha256; accepted (sha256 %s)", relative, digest)
            elif digest != expected:
                raise UserError(f"{archive}: {relative} has sha256 {digest}, expected {expected}: "
                                "the download is corrupt or not bAbI v1.2; delete it and retry")
            verified[relative] = data
    written = []
    for relative, data in verified.items():
        path = root / relative
        with replacing(path) as part:
            part.write_bytes(data)
        written.append(path)
    return written
