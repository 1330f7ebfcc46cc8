"""The reference side of tests/cli/bpe_tiktoken.sh: writes the held corpus
(one document per file) and compares boost-data's shards with tiktoken's
encode_ordinary on the same rank file and pattern, token for token.

  bpe_tiktoken_check.py corpus DIR            write the documents
  bpe_tiktoken_check.py ranks GPT2 OUT        GPT-2's ranks, lines reversed, CRLF
  bpe_tiktoken_check.py compare PRETOK RANKS DIR SHARD
  bpe_tiktoken_check.py hf-tokenizer HFDIR RANKS PRETOK DIR
  bpe_tiktoken_check.py hf HFDIR RANKS DIR GENERATE.json
      (tests/cli/bpe_export.sh: transformers' AutoTokenizer on boost-export's
      vocab.json + merges.txt encodes the corpus as tiktoken does and the
      prompt as boost-generate did; AutoModelForCausalLM's greedy tokens are
      boost-generate's)

The patterns come from the reference packages themselves: gpt2 and cl100k
from tiktoken_ext.openai_public, llama3 from transformers' TikTokenConverter
(the Llama 3 pattern). Bytes that are not UTF-8 go in as tiktoken takes
them from a file read with errors="surrogateescape": encode_ordinary turns
each lone surrogate into U+FFFD.
"""
import inspect
import os
import random
import re
import struct
import sys

FORTUNES = "/usr/share/games/fortunes"

TEXTS = {
    "multilingual": "Grüße aus Köln, straße STRASSE. Ελληνικά κείμενα. Русский текст, ещё. 中文文本，没有空格。"
    "日本語のテキストとカタカナ。한국어 텍스트입니다. العربية نص. हिन्दी पाठ। עברית. Türkçe İstanbul ıi. "
    "Tiếng Việt có dấu. ภาษาไทย ไม่มีช่องว่าง",
    "digits": "1234567890" * 40 + " 3.14159265358979 1,000,000 ٣٤٥٦٧ ३४५६ ½¾ ²³ Ⅻ ⅷ 0x1F600 12a34b 007",
    "whitespace": "a  b   c    d\t\te\n\n\nf \n \n  g\r\n\r\nh\u00a0\u00a0i\u2003j\u3000k \u0085l\u2028m\u180en \u200bo\ufeffp\x0b\x0cq\x1c\x1dr"
    + " " * 200 + "end" + "\t \n" * 30 + "  trailing   ",
    "contractions": "I'm you're he's we'll they've I'd DON'T WE'LL She'S 'tis it’s o'clock "
    "ROCK'N'ROLL y'all'd've 'S 'Ll 'VE ''' ' s",
    "emoji": "😀😃😄 👍🏽 👩‍👩‍👧‍👦 🇩🇪🇯🇵 ❤️ ✨ 🤖: done! 🏳️‍🌈 e\u0301 n\u0303 ﬁ ｆｕｌｌ",
    "punctuation": "!!!??? ... --- ``` {}[]() <|endoftext|> @#$%^&*_+= ~/.bashrc C:\\Users\\x \"quoted\" «»",
    "code": "int main(void) {\n    for (int i = 0; i < 10; ++i)\n        printf(\"%d\\n\", i);\n    return 0;\n}\n",
}

INVALID = [
    b"\xff\xfe abc \xc3\x28 def \xe2\x82 end \xed\xa0\x80 x \xf4\x90\x80\x80 y \xc0\xaf z",
    b"caf\xe9 na\xefve \x80\x81\x82 tail\xe2",
]


def corpus(d):
    os.makedirs(d, exist_ok=True)
    docs = {}
    for name in ("computers", "science", "linux"):
        with open(os.path.join(FORTUNES, name), "rb") as f:
            docs["fortune-" + name] = f.read()
    for name, text in TEXTS.items():
        docs["text-" + name] = text.encode()
    for i, b in enumerate(INVALID):
        docs["invalid-%d" % i] = b
    rng = random.Random(43)
    for i in range(4):  # random code points from many scripts, spaces and digits between
        cps = [rng.choice([0x20, 0x0A, rng.randrange(0x21, 0x7F), rng.randrange(0xA0, 0x3000),
                           rng.randrange(0x4E00, 0x9FFF), rng.randrange(0x1F300, 0x1FAFF)]) for _ in range(3000)]
        docs["random-cp-%d" % i] = "".join(chr(c) for c in cps if not 0xD800 <= c < 0xE000).encode()
    # long pieces (the heap merge above 256 bytes): one letter, a pattern,
    # random letters, a digit run (gpt2 keeps \p{N}+ whole)
    docs["long-runs"] = ("a" * 5000 + " " + "ab" * 2500 + " " + "".join(rng.choice("etaoinshrdlu") for _ in range(6000))
                         + " " + "1234567890" * 400 + " " + "ä" * 1500).encode()
    for i in range(2):  # random bytes (no NUL: boost-data skips binary files)
        docs["random-bytes-%d" % i] = bytes(rng.randrange(1, 256) for _ in range(4000))
    for name, b in docs.items():
        with open(os.path.join(d, name + ".txt"), "wb") as f:
            f.write(b)


def ranks_file(src, out):
    with open(src, "rb") as f:
        lines = [l for l in f.read().splitlines() if l]
    with open(out, "wb") as f:
        f.write(b"\r\n".join(reversed(lines)) + b"\r\n")


def pattern(pretok):
    import tiktoken_ext.openai_public as op
    if pretok == "gpt2":
        return op.r50k_pat_str
    if pretok == "cl100k":  # read from the source: calling cl100k_base() downloads its ranks
        return re.search(r'"pat_str": r"""(.*?)"""', inspect.getsource(op.cl100k_base)).group(1)
    if pretok == "llama3":
        from transformers.convert_slow_tokenizer import TikTokenConverter
        return inspect.signature(TikTokenConverter.__init__).parameters["pattern"].default
    raise SystemExit("unknown pre-tokenizer " + pretok)


def compare(pretok, ranks, d, shard):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    mr = load_tiktoken_bpe(ranks)
    eot = max(mr.values()) + 1
    enc = tiktoken.Encoding(name="t", pat_str=pattern(pretok), mergeable_ranks=mr,
                            special_tokens={"<|endoftext|>": eot})
    with open(shard, "rb") as f:
        raw = f.read()
    assert raw[:8] == b"BOOSTTOK", "not a boost shard"
    width, vocab = struct.unpack_from("<II", raw, 16)
    ntok = struct.unpack_from("<Q", raw, 24)[0]
    assert vocab == eot + 1, "vocab %d, expected %d" % (vocab, eot + 1)
    got = list(struct.unpack_from("<%d%s" % (ntok, "H" if width == 2 else "I"), raw, 256))
    pos, total = 0, 0
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            text = f.read().decode("utf-8", "surrogateescape")
        want = [eot] + enc.encode_ordinary(text)
        have = got[pos:pos + len(want)]
        if have != want:
            i = next((k for k in range(min(len(have), len(want))) if have[k] != want[k]), min(len(have), len(want)))
            ctx = enc.decode_bytes(want[max(0, i - 3):i + 3])
            print("MISMATCH %s %s token %d: boost %s tiktoken %s near %r" %
                  (pretok, name, i, have[max(0, i - 3):i + 3], want[max(0, i - 3):i + 3], ctx))
            return 1
        pos += len(want)
        total += len(want)
    if pos != len(got):
        print("MISMATCH %s: shard has %d tokens, tiktoken %d" % (pretok, len(got), pos))
        return 1
    print("%s: %d documents, %d tokens equal tiktoken's" % (pretok, len(os.listdir(d)), total))
    return 0


def hf_tokenizer(hfdir, ranks, pretok, d):
    """AutoTokenizer on boost-export's folder against tiktoken on the corpus:
    the tokenizer, or None after printing the first difference."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from transformers import AutoTokenizer
    mr = load_tiktoken_bpe(ranks)
    enc = tiktoken.Encoding(name="t", pat_str=pattern(pretok), mergeable_ranks=mr,
                            special_tokens={"<|endoftext|>": max(mr.values()) + 1})
    tok = AutoTokenizer.from_pretrained(hfdir)
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            text = f.read().decode("utf-8", "replace")  # transformers takes no lone surrogates
        # split_special_tokens: a literal <|endoftext|> is text, as in encode_ordinary
        want, have = enc.encode_ordinary(text), tok.encode(text, split_special_tokens=True)
        if want != have:
            i = next((k for k in range(min(len(have), len(want))) if have[k] != want[k]), min(len(have), len(want)))
            print("MISMATCH transformers (%s) %s token %d: %s, tiktoken %s" % (pretok, name, i, have[i:i + 5], want[i:i + 5]))
            return None
    print("transformers' %s on the %s export: the corpus as tiktoken" % (type(tok).__name__, pretok))
    return tok


def hf(hfdir, ranks, d, gen_json):
    import json
    import torch
    from transformers import AutoModelForCausalLM
    tok = hf_tokenizer(hfdir, ranks, "gpt2", d)
    if tok is None:
        return 1
    with open(gen_json) as f:
        g = json.load(f)
    prompt = [tok.eos_token_id] + tok.encode(g["prompt_text"])
    assert prompt == g["prompt_tokens"], "transformers' prompt %s, boost-generate's %s" % (prompt, g["prompt_tokens"])
    model = AutoModelForCausalLM.from_pretrained(hfdir, trust_remote_code=True, torch_dtype=torch.float32)
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=len(g["tokens"]),
                             do_sample=False, pad_token_id=tok.eos_token_id)[0, len(prompt):].tolist()
    assert out == g["tokens"], "transformers generate %s, boost-generate %s" % (out, g["tokens"])
    text = tok.decode(out)
    assert text == g["text"], "transformers decodes %r, boost-generate printed %r" % (text, g["text"])
    print("transformers: the corpus as tiktoken, prompt %s and %d greedy tokens %r as boost-generate" %
          (prompt, len(out), text))
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "corpus":
        corpus(sys.argv[2])
    elif cmd == "ranks":
        ranks_file(sys.argv[2], sys.argv[3])
    elif cmd == "compare":
        sys.exit(compare(*sys.argv[2:6]))
    elif cmd == "hf":
        sys.exit(hf(*sys.argv[2:6]))
    elif cmd == "hf-tokenizer":
        sys.exit(0 if hf_tokenizer(*sys.argv[2:6]) else 1)
    else:
        raise SystemExit("unknown command " + cmd)
