"""Builds the CoNLL-2003-shaped tagging set of this folder from WikiText-2 (CC BY-SA 3.0).

Real Wikipedia sentences (WikiText-2's valid and test articles, already word-tokenized), their
entities tagged by rule: maximal runs of capitalized words, typed from word lists written here
(PER: a known first name followed by a capitalized word, or a title such as "King" before a
name; LOC: countries, cities, regions and geographic heads such as "River"; ORG: heads such as
"University", "Party", "Army", "Records" and a few acronyms; MISC: nationalities, languages,
religions, wars and awards). A sentence with a capitalized run the rules cannot type (past its
first word) is left out, so every kept label is consistent. Sentences of 6 to 22 words are
kept; they are then drawn, per entity type, towards CoNLL-2003's mix of entities (PER 28%,
LOC 30%, ORG 27%, MISC 15%, and about a fifth of the sentences without an entity), grouped
into documents of 8 to 16 sentences between `-DOCSTART-` lines, and written in CoNLL's four
columns (`WORD POS CHUNK NER`, IOB2; POS and chunk are placeholders, `NN` and `O`, as the
reader ignores them).

    python benchmarks/data/conll_shape/build.py --wikitext_dir=../shared/data/wikitext-2

writes train.txt (1,500 sentences), dev.txt (500) beside this file; the dev sentences come
from other articles than the training ones.
"""

import argparse
import collections
import os
import random
import re

HERE = os.path.dirname(os.path.abspath(__file__))

FIRST_NAMES = set("""
John James William George Charles Thomas Henry Robert Edward Richard Joseph David Michael Peter
Paul Mark Andrew Stephen Daniel Frank Arthur Albert Walter Harry Frederick Francis Samuel Louis
Jack Edwin Alfred Herbert Hugh Ernest Harold Ralph Roger Simon Philip Anthony Christopher Brian
Kevin Steve Tom Bob Bill Jim Mike Chris Matt Tony Alan Ian Neil Gary Eric Carl Martin Patrick
Kelly Mary Elizabeth Anne Margaret Jane Sarah Catherine Alice Helen Emily Lucy Rose Ruth Susan
Barbara Nancy Lisa Karen Julia Maria Anna Laura Victoria Charlotte Grace Emma Amy Jennifer
Jessica Michelle Diana Dorothy Florence Edith Ellen Joan Lady Marie Jean Pierre Carlos Juan
Jose Luis Antonio Giovanni Hans Karl Otto Friedrich Wilhelm Ivan Nikolai Vladimir Sergei Ben
Sam Joe Nick Adam Jason Ryan Justin Scott Brad Matthew Jonathan Timothy Lawrence Leonard Ray
Raymond Howard Lewis Allen Edgar Oliver Nathan Isaac Benjamin Jacob Aaron Marcus Julius
Augustus Alexander Constantine Harvey Gordon Duncan Malcolm Stuart Keith Graham Douglas Craig
Beyoncé Rihanna Madonna""".split())
TITLES = set("Mr. Mrs. Dr. Sir Lord King Queen President General Captain Prince Princess "
             "Bishop Pope Emperor Admiral Colonel Senator Governor Saint St. Lieutenant "
             "Major Judge Duke".split())
LOCATIONS = set("""
England Scotland Wales Ireland Britain France Germany Spain Italy Portugal Russia China Japan
India Canada Australia Mexico Brazil Egypt Greece Turkey Poland Austria Hungary Sweden Norway
Denmark Finland Netherlands Belgium Switzerland Israel Iran Iraq Syria Korea Vietnam Cuba Chile
Peru Argentina Africa Europe Asia America Antarctica Arctic London Paris Berlin Rome Madrid
Moscow Tokyo Beijing Dublin Edinburgh Glasgow Manchester Liverpool Birmingham Oxford Cambridge
York Boston Chicago Washington Philadelphia Detroit Atlanta Houston Dallas Miami Seattle Denver
Texas California Florida Virginia Ohio Michigan Georgia Carolina Pennsylvania Massachusetts
Illinois Indiana Kentucky Tennessee Alabama Mississippi Louisiana Arizona Oregon Nevada Utah
Montana Idaho Wyoming Colorado Kansas Nebraska Iowa Missouri Arkansas Oklahoma Minnesota
Wisconsin Maryland Delaware Vermont Maine Hawaii Alaska Ontario Quebec Toronto Vancouver
Sydney Melbourne Jerusalem Baghdad Cairo Athens Vienna Prague Warsaw Stockholm Lisbon
Amsterdam Brussels Venice Florence Naples Milan Munich Hamburg Normandy Bavaria Prussia
Pacific Atlantic Mediterranean Caribbean Gulf Manhattan Brooklyn Hollywood Kent Sussex Essex
Yorkshire Lancashire Cornwall Devon Somerset Hampshire Surrey Norfolk Suffolk Dorset
Constantinople Byzantium Babylon Mesopotamia Persia Arabia Bengal Tibet Mongolia Siberia
Ukraine Belgrade Serbia Croatia Bosnia Romania Bulgaria Jamaica Haiti Philippines Indonesia
Thailand Burma Malaysia Singapore Zealand Nepal Pakistan Afghanistan Lebanon Jordan Libya
Morocco Algeria Tunisia Nigeria Kenya Ethiopia Sudan Congo Ghana Zimbabwe Uganda Somalia
Ottawa Montreal Calcutta Bombay Delhi Madras Shanghai Hong Kong Osaka Kyoto Seoul Manila
Jakarta Bangkok Havana Lima Santiago Bogotá Caracas Quito Ceylon Sicily Sardinia Corsica
Crete Cyprus Malta Iceland Greenland Rhine Danube Thames Nile Amazon Mississippi Missouri
""".split()) | {"New York", "New Jersey", "New Zealand", "New Orleans", "Los Angeles",
               "San Francisco", "United States", "United Kingdom", "Soviet Union",
               "South Africa", "North America", "South America", "Hong Kong", "Sri Lanka",
               "Rhode Island", "New Hampshire", "North Carolina", "South Carolina",
               "West Virginia", "New Mexico", "Saudi Arabia", "Great Britain", "Northern Ireland",
               "East Germany", "West Germany", "Las Vegas", "Puerto Rico", "Nova Scotia",
               "British Columbia", "Middle East", "Pearl Harbor", "Buenos Aires"}
LOCATION_HEADS = set("River Island Islands Mountains Mountain Ocean Sea County Lake Bay Valley "
                     "Street Road Avenue Park Peninsula Province Desert Forest Hill Hills Strait "
                     "Canal Bridge Coast Creek Harbour Harbor Square Highway Castle".split())
ORGANIZATION_HEADS = set("University College School Company Corporation Party Army Navy Club "
                         "Records Association Council Church Committee Society League Department "
                         "Parliament Congress Senate Institute Museum Academy Group Band "
                         "Orchestra Corps Force Agency Bank Railway Airlines Inc. Ltd. FC United "
                         "City Rovers Athletic Commission Office Ministry Foundation Guard "
                         "Brigade Division Regiment Squadron Fleet Times Post Journal Network "
                         "Studios Entertainment Pictures Television Service Authority Union "
                         "Federation Court Cabinet Government Assembly Hospital Trust".split())
ORGANIZATIONS = set("BBC CNN NASA NATO FIFA UEFA IBM NBC CBS ABC MTV EMI Sony Nintendo Microsoft "
                    "Apple Google Ford Boeing Reuters Billboard Marvel DC Disney Warner Columbia "
                    "Parliament Congress Senate Vatican Wehrmacht Luftwaffe RAF NFL NBA NHL MLB "
                    "Arsenal Chelsea Liverpool Juventus Barcelona Yankees Celtics".split())
MISCELLANEOUS = set("""
English French German Spanish Italian Portuguese Russian Chinese Japanese Indian Canadian
Australian Mexican Brazilian Egyptian Greek Turkish Polish Austrian Hungarian Swedish Norwegian
Danish Finnish Dutch Belgian Swiss Israeli Iranian Iraqi Syrian Korean Vietnamese Cuban Irish
Scottish Welsh British American African European Asian Arab Arabic Latin Roman Byzantine
Christian Catholic Protestant Anglican Methodist Baptist Jewish Muslim Islamic Hindu Buddhist
Norman Saxon Viking Celtic Gothic Victorian Elizabethan Soviet Nazi Confederate Republican
Democrat Democratic Communist Socialist Olympic Olympics Christmas Easter Grammy Oscar Emmy
Renaissance Hebrew Persian Ottoman Mongol Hawaiian Texan Californian Parisian Londoner
Catholics Christians Muslims Jews Germans Americans Britons Romans Greeks Russians Japanese
Englishman Frenchman Scots Irishmen Italians Spaniards Egyptians Mexicans Canadians Australians
Bible Koran Torah Quran Sabbath Ramadan Holocaust Crusade Crusades Reformation Baroque Gothic
""".split()) | {"World War I", "World War II", "Civil War", "Cold War", "Academy Award",
               "Nobel Prize", "Grammy Award", "Super Bowl", "World Cup", "Victoria Cross",
               "Olympic Games", "Pulitzer Prize", "Revolutionary War", "Korean War",
               "Vietnam War", "Hundred Years' War", "Seven Years' War", "Industrial Revolution",
               "French Revolution", "Great Depression", "Middle Ages", "Iron Age", "Bronze Age",
               "Stone Age", "Champions League", "Premier League", "Top 40", "Hot 100"}
# Bodies CoNLL tags ORG when named alone ("Parliament voted", "the Army said").
SINGLE_WORD_ORGANIZATIONS = set("Parliament Congress Senate Navy Army Government Cabinet Church "
                                "Court Council Company Party Admiralty Legislature".split())
# Capitalized at a sentence's start, never the start of a name.
FUNCTION_WORDS = set("the a an in at on of for to from by with after before during as when "
                     "while since but and or if this that these those his her their its our my "
                     "under over between against into through".split())
CONNECTORS = {"of", "the", "and", "de", "von", "van", "du", "la", "for", "'s"}
MONTHS_AND_DAYS = set("January February March April May June July August September October "
                      "November December Monday Tuesday Wednesday Thursday Friday Saturday "
                      "Sunday".split())
CONLL_MIX = {"PER": 0.28, "LOC": 0.30, "ORG": 0.27, "MISC": 0.15}


def articles(paths):
    """[(title, [sentence as a word list])] of WikiText files."""
    result = []
    for path in paths:
        title, sentences = None, []
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if re.fullmatch(r"= [^=].* =", line):
                    if title is not None:
                        result.append((title, sentences))
                    title, sentences = line.strip("= "), []
                    continue
                if not line or line.startswith("="):
                    continue
                line = re.sub(r" @(.)@ ", r"\1", line)
                for sentence in re.split(r"(?<= [.?!]) ", line):
                    words = sentence.split()
                    if words and "<unk>" not in words:
                        sentences.append(words)
        if title is not None:
            result.append((title, sentences))
    return result


def book_articles(folder):
    """[(title, [sentence as a word list])] of the public-domain books, a book per article."""
    result = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".txt") or name == "README.md":
            continue
        sentences = []
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for paragraph in f:
                paragraph = paragraph.replace("\u2019", "'").replace("\u201c", '"').replace(
                    "\u201d", '"')
                for sentence in re.split(r"(?<=[.?!])\s+(?=[A-Z\"])", paragraph.strip()):
                    words = re.findall(r"[A-Za-z]+(?:'[a-z]+)?\.?(?<=Mr\.|Dr\.|St\.)|"
                                       r"[A-Za-z]+(?:'[a-z]+)?|\d+|[^\sA-Za-z\d]", sentence)
                    if words:
                        sentences.append(words)
        result.append((name, sentences))
    return result


def is_capitalized(word):
    return word[:1].isupper() and any(c.isalpha() for c in word)


def entity_type(span, previous):
    """The type of a run of capitalized words, or None when the rules cannot tell."""
    text = " ".join(span)
    if text in MISCELLANEOUS or (len(span) == 1 and span[0] in MISCELLANEOUS):
        return "MISC"
    if text in LOCATIONS or span[-1] in LOCATION_HEADS and len(span) > 1:
        return "LOC"
    if (text in ORGANIZATIONS or (span[-1] in ORGANIZATION_HEADS and len(span) > 1)
            or text in SINGLE_WORD_ORGANIZATIONS
            or (len(span) == 1 and re.fullmatch(r"[A-Z]{3,5}", text)
                and not re.fullmatch(r"[IVXLC]+", text))):
        return "ORG"
    if (span[0] in FIRST_NAMES and len(span) <= 3) or (previous in TITLES and len(span) <= 3):
        return "PER"
    return None


def tag_sentence(words):
    """IOB2 tags, or None when a capitalized run past the first word has no type."""
    tags = ["O"] * len(words)
    index = 0
    while index < len(words):
        word = words[index]
        if not is_capitalized(word) or word in TITLES or word in MONTHS_AND_DAYS:
            index += 1
            continue
        end = index + 1
        while end < len(words) and (is_capitalized(words[end]) and words[end] not in TITLES
                                    or (words[end] in CONNECTORS and end + 1 < len(words)
                                        and is_capitalized(words[end + 1])
                                        and words[end] != "'s")):
            end += 1
        if index == 0 and end > 1 and word.lower() in FUNCTION_WORDS:
            index += 1  # "In Bond Street", "The European Commission": not part of the name
            continue
        span = words[index:end]
        kind = entity_type(span, words[index - 1] if index else None)
        if kind is None and index == 0 and len(span) > 1:
            kind = entity_type(span[1:], span[0])
            if kind is not None:
                index += 1
                span = span[1:]
        if kind is None:
            if index == 0 and len(span) == 1:  # a sentence's first word
                index = end
                continue
            return None
        tags[index] = f"B-{kind}"
        for inside in range(index + 1, end):
            tags[inside] = f"I-{kind}"
        index = end
    return tags


def entity_types(tags):
    return [tag[2:] for tag in tags if tag.startswith("B-")]


def draw(candidates, count, rng):
    """`count` (article index, words, tags) drawn towards CoNLL_MIX of entities."""
    by_type = collections.defaultdict(list)
    empty = []
    for item in candidates:
        kinds = entity_types(item[2])
        if not kinds:
            empty.append(item)
        else:
            by_type[collections.Counter(kinds).most_common(1)[0][0]].append(item)
    for items in by_type.values():
        rng.shuffle(items)
    rng.shuffle(empty)
    chosen = empty[:count // 5]
    counts = collections.Counter()
    while len(chosen) < count:
        total = sum(counts.values()) or 1
        # The type furthest below its share, among those with sentences left.
        kinds = [k for k in CONLL_MIX if by_type[k]]
        if not kinds:
            break
        kind = min(kinds, key=lambda k: counts[k] / total - CONLL_MIX[k])
        item = by_type[kind].pop()
        chosen.append(item)
        counts.update(entity_types(item[2]))
    chosen.sort(key=lambda item: item[0])  # back in article order
    return chosen


def write(path, chosen, rng):
    lines = []
    article, left = None, 0
    for index, words, tags in chosen:
        if index != article or left == 0:
            lines += ["-DOCSTART- -X- -X- O", ""]
            article, left = index, rng.randint(8, 16)
        lines += [f"{word} NN O {tag}" for word, tag in zip(words, tags)] + [""]
        left -= 1
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wikitext_dir", default=os.path.join(HERE, "..", "..", "..", "..",
                                                               "shared", "data", "wikitext-2"))
    parser.add_argument("--books_dir", default=os.path.join(os.path.dirname(HERE), "..", "..", "..",
                                                             "shared", "data", "books"))
    parser.add_argument("--train", type=int, default=1500)
    parser.add_argument("--dev", type=int, default=500)
    args = parser.parse_args()
    rng = random.Random(2003)
    texts = articles([os.path.join(args.wikitext_dir, name) for name in ("valid.txt", "test.txt")])
    texts += book_articles(args.books_dir)
    candidates = []
    for index, (_, sentences) in enumerate(texts):
        for words in sentences:
            if 5 <= len(words) <= 24:
                tags = tag_sentence(words)
                if tags is not None:
                    candidates.append((index, words, tags))
    order = list(range(len(texts)))
    rng.shuffle(order)
    dev_articles = set(order[:len(order) // 4])
    splits = {"train": [c for c in candidates if c[0] not in dev_articles],
              "dev": [c for c in candidates if c[0] in dev_articles]}
    for name, count in (("train", args.train), ("dev", args.dev)):
        chosen = draw(splits[name], count, rng)
        write(os.path.join(HERE, f"{name}.txt"), chosen, rng)
        kinds = collections.Counter(k for _, _, tags in chosen for k in entity_types(tags))
        total = sum(kinds.values())
        print(f"{name}: {len(chosen)} sentences of {len(splits[name])}, "
              f"{sum(len(w) for _, w, _ in chosen) / len(chosen):.1f} words each, {total} "
              f"entities: " + ", ".join(f"{k} {kinds[k]} ({kinds[k] / total:.0%})"
                                        for k in CONLL_MIX))


if __name__ == "__main__":
    main()
