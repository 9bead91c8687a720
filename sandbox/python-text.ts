/*
 * Text codecs for a Python tool's isolate (V8 has none; Pyodide and Emscripten use them for every string):
 * UTF-8 both ways, and decoding of UTF-16LE and Latin-1, which Pyodide uses for Python's compact strings.
 * Part of the Python runtime's script (src/isolation/isolate/python-boot.ts joins it before
 * python-runtime.ts, in one function scope).
 */

// eslint-disable-next-line @typescript-eslint/no-unused-vars
class TextEncoderImpl {
  get encoding(): string {
    return "utf-8";
  }
  encode(text = ""): Uint8Array {
    const out = new Uint8Array(text.length * 3);
    return out.subarray(0, this.encodeInto(text, out).written);
  }
  encodeInto(text: string, dest: Uint8Array): { read: number; written: number } {
    let at = 0;
    let read = 0;
    for (let i = 0; i < text.length; i++) {
      let code = text.charCodeAt(i);
      let units = 1;
      if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
        const low = text.charCodeAt(i + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          units = 2;
        }
      }
      if (code >= 0xd800 && code <= 0xdfff) code = 0xfffd; // a lone surrogate
      const size = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
      if (at + size > dest.length) break;
      if (size === 1) dest[at++] = code;
      else if (size === 2) {
        dest[at++] = 0xc0 | (code >> 6);
        dest[at++] = 0x80 | (code & 63);
      } else if (size === 3) {
        dest[at++] = 0xe0 | (code >> 12);
        dest[at++] = 0x80 | ((code >> 6) & 63);
        dest[at++] = 0x80 | (code & 63);
      } else {
        dest[at++] = 0xf0 | (code >> 18);
        dest[at++] = 0x80 | ((code >> 12) & 63);
        dest[at++] = 0x80 | ((code >> 6) & 63);
        dest[at++] = 0x80 | (code & 63);
        i++;
      }
      read += units;
    }
    return { read, written: at };
  }
}

// eslint-disable-next-line @typescript-eslint/no-unused-vars
class TextDecoderImpl {
  private readonly fatal: boolean;
  private readonly utf16: boolean;
  /** One byte per character: Pyodide hands compact (Latin-1) Python strings over so. */
  private readonly latin1: boolean;
  constructor(label = "utf-8", options: { fatal?: boolean } = {}) {
    this.utf16 = /^utf-16(le)?$/i.test(label);
    this.latin1 = /^(latin1|iso-8859-1|ascii|us-ascii|windows-1252)$/i.test(label);
    if (!this.utf16 && !this.latin1 && !/^utf-?8$/i.test(label))
      throw new RangeError(`TextDecoder: only UTF-8, UTF-16LE and Latin-1 are supported, not ${label}`);
    this.fatal = options.fatal === true;
  }
  get encoding(): string {
    return this.utf16 ? "utf-16le" : this.latin1 ? "windows-1252" : "utf-8";
  }
  decode(input?: ArrayBuffer | ArrayBufferView): string {
    if (input === undefined) return "";
    const bytes = ArrayBuffer.isView(input) ? new Uint8Array(input.buffer, input.byteOffset, input.byteLength) : new Uint8Array(input);
    const units: number[] = [];
    if (this.utf16 || this.latin1) {
      const step = this.utf16 ? 2 : 1;
      let text = "";
      for (let i = 0; i + step - 1 < bytes.length; i += step) {
        units.push(this.utf16 ? bytes[i]! | (bytes[i + 1]! << 8) : bytes[i]!);
        if (units.length >= 8192) {
          text += String.fromCharCode(...units);
          units.length = 0;
        }
      }
      return text + String.fromCharCode(...units);
    }
    let text = "";
    for (let i = 0; i < bytes.length;) {
      const first = bytes[i]!;
      const size = first < 0x80 ? 1 : first >= 0xc2 && first < 0xe0 ? 2 : first >= 0xe0 && first < 0xf0 ? 3 : first >= 0xf0 && first < 0xf5 ? 4 : 0;
      let code = size === 1 ? first : size === 2 ? first & 0x1f : size === 3 ? first & 0x0f : first & 0x07;
      let valid = size > 0 && i + size <= bytes.length;
      for (let k = 1; valid && k < size; k++) {
        const next = bytes[i + k]!;
        if ((next & 0xc0) !== 0x80) valid = false;
        else code = (code << 6) | (next & 63);
      }
      if (valid && ((size === 3 && (code < 0x800 || (code >= 0xd800 && code <= 0xdfff))) || (size === 4 && (code < 0x10000 || code > 0x10ffff)))) valid = false;
      if (!valid) {
        if (this.fatal) throw new TypeError("The encoded data was not valid UTF-8");
        units.push(0xfffd);
        i++;
      } else {
        if (code >= 0x10000) units.push(0xd800 + ((code - 0x10000) >> 10), 0xdc00 + ((code - 0x10000) & 0x3ff));
        else units.push(code);
        i += size;
      }
      if (units.length >= 8192) {
        text += String.fromCharCode(...units);
        units.length = 0;
      }
    }
    return text + String.fromCharCode(...units);
  }
}
