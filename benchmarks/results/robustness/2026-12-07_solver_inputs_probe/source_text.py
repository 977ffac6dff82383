"""KAS source text with odd characters and forms (run from the project root)."""
import numpy as np

import irfuse

base = "scalar x, y;\ninput x;\ny = add(x, x);\nreturn y;\n"
cases = {
    "crlf": base.replace("\n", "\r\n"), "cr only": base.replace("\n", "\r"), "bom": "\ufeff" + base,
    "tabs": base.replace(" ", "\t"), "nul": base.replace("y = add", "y\x00 = add"),
    "latin-1 name": base.replace("y", "\u00ff"), "greek name": base.replace("y", "\u03c3"),
    "fullwidth semicolon": base.replace("input x;", "input x\uff1b"), "nbsp": base.replace("y = add", "y\u00a0= add"),
    "zero-width space": base.replace("y = add", "y\u200b = add"), "long name": base.replace("y", "y" * 5000),
    "block comment": "/* c */" + base, "unterminated comment": "/* c " + base,
    "comment at end, no newline": base + "// end", "empty": "", "blank": "  \n\t", "only a comment": "// nothing\n",
    "form feed": base.replace("\n", "\n\f"), "vertical tab": base.replace(" ", "\v"),
    "lone surrogate": base.replace("y", "\udcff"), "400-digit literal": base.replace("add(x, x)", "smul(x, 1" + "0" * 400 + ")"),
    "hex literal": base.replace("add(x, x)", "smul(x, 0x10)"), "1_000": base.replace("add(x, x)", "smul(x, 1_000)"),
    "1e-400": base.replace("add(x, x)", "smul(x, 1e-400)"), "nan": base.replace("add(x, x)", "smul(x, nan)"),
    "-0.0": base.replace("add(x, x)", "smul(x, -0.0)"), "input twice": base.replace("input x;", "input x, x;"),
    "return twice": base + "return y;\n", "keyword as a name": base.replace("y", "return"),
}
x = np.arange(4, dtype=np.float32)
for name, src in cases.items():
    try:
        print(f"{name:28s} ran: {irfuse.compile(src, backend='cpu')(x)[0].tolist()}")
    except irfuse.IrfuseError as e:
        print(f"{name:28s} refused: {str(e).splitlines()[0][:120]!r}")
    except Exception as e:
        print(f"{name:28s} !! {type(e).__name__}: {str(e)[:120]!r}")
