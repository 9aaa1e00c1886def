// sandgate's locale formats for the QuickJS engine, which has no ICU: `Intl` and the locale
// methods of builtins (`toLocaleString`, `localeCompare`, ...). Loaded on first use, from
// bytecode the worker compiled once. (The V8 engine gives its guests V8's own `Intl`, with all
// of ICU, and never loads this.)
//
// It formats what agent code reaches for (grouped numbers, currency, percentages, compact
// numbers, units, lists, dates and times, sorting text, plurals, relative times) for en-US,
// en-GB, de-DE and fr-FR, as ICU does: `tests/intl.rs` checks each case against Node. Any other
// locale, option or value it cannot give exactly is a RangeError that says what it supports,
// never a result that differs from every other JavaScript runtime. Times are UTC (the sandbox
// has no time zone).
export default function () {
  "use strict";
  const freeze = Object.freeze;
  const SUPPORTED = "en-US, en-GB, de-DE and fr-FR (en, de and fr are the first of each)";
  const unsupported = (what) =>
    new RangeError(
      `${what} is not supported in the sandbox on this engine, which has no ICU: it formats ${SUPPORTED}, with the common options. Format it yourself, or use one of those (the V8 engine, where a profile allows it, has all of ICU).`,
    );

  // ---- the locales -----------------------------------------------------------------------
  // (their data is `locale_data.js`)
  // The locale asked for (the first of a list; none is en-US), as its canonical tag.
  function localeOf(locales) {
    const asked = Array.isArray(locales) ? locales[0] : locales;
    if (asked === undefined) return { tag: "en-US", rules: LOCALES["en-US"] };
    const text = String(asked);
    const parts = text.split("-");
    const language = parts[0].toLowerCase();
    const region = parts.length === 2 && parts[1].length === 2 ? parts[1].toUpperCase() : undefined;
    const tag = region === undefined ? language : `${language}-${region}`;
    const rules = parts.length === 1 ? LOCALES[FIRST_OF[language]] : parts.length === 2 ? LOCALES[tag] : undefined;
    if (rules === undefined) throw unsupported(`the locale ${JSON.stringify(text)}`);
    return { tag, rules };
  }

  // ---- decimal digits ---------------------------------------------------------------------
  // A number as the digits of its shortest form and where its point is (1234.5: "12345", 4),
  // rounded on those digits, half away from zero, as ICU rounds (not on the binary value, as
  // `toFixed` does: 1.005 rounds to 1.01).
  const decimal = (x) => {
    if (x === 0) return { digits: "", point: 1 };
    const [mantissa, exponent] = x.toExponential().split("e");
    return { digits: mantissa.replace(".", ""), point: Number(exponent) + 1 };
  };
  const keepDigits = (d, keep) => {
    if (keep >= d.digits.length) return d;
    if (keep < 0) return { digits: "", point: d.point };
    let kept = d.digits.slice(0, keep);
    if (d.digits.charCodeAt(keep) >= 53) {
      let i = kept.length - 1;
      while (i >= 0 && kept[i] === "9") i--;
      if (i < 0) return { digits: "1", point: d.point + 1 };
      kept = kept.slice(0, i) + String.fromCharCode(kept.charCodeAt(i) + 1);
    }
    return { digits: kept, point: d.point };
  };
  // Rounds as the options say: to fraction digits, to significant digits, or (compact's
  // default) to two significant digits but never fewer than the whole part.
  const rounded = (d, digits) => {
    const keep = digits.significant ? digits.max : digits.compact ? Math.max(d.point, 2) : d.point + digits.max;
    const r = keepDigits(d, keep);
    return r.digits.replace(/0+$/, "") === "" ? { digits: "", point: 1 } : r;
  };
  const wholeAndFraction = (d, digits) => {
    const all = d.digits.replace(/0+$/, "");
    let whole = d.point <= 0 ? "0" : all.slice(0, d.point).padEnd(d.point, "0");
    let fraction = d.point >= 0 ? all.slice(d.point) : "0".repeat(-d.point) + all;
    const minFraction = digits.significant
      ? Math.max(0, digits.min - Math.max(d.point, all === "" ? 1 : d.point))
      : digits.min;
    if (fraction.length < minFraction) fraction = fraction.padEnd(minFraction, "0");
    if (whole.length < digits.minInteger) whole = whole.padStart(digits.minInteger, "0");
    return { whole, fraction };
  };
  const grouped = (whole, separator, minimum) => {
    if (separator === "" || whole.length < minimum) return whole;
    let out = "";
    for (let i = 0; i < whole.length; i++) {
      if (i > 0 && (whole.length - i) % 3 === 0) out += separator;
      out += whole[i];
    }
    return out;
  };

  // ---- numbers ------------------------------------------------------------------------------
  const KNOWN_NUMBER_OPTIONS = [
    "style",
    "currency",
    "currencyDisplay",
    "unit",
    "unitDisplay",
    "notation",
    "compactDisplay",
    "minimumFractionDigits",
    "maximumFractionDigits",
    "minimumSignificantDigits",
    "maximumSignificantDigits",
    "useGrouping",
    "minimumIntegerDigits",
    "signDisplay",
    "localeMatcher",
    "numberingSystem",
  ];
  const inRange = (value, low, high, name) => {
    const n = Number(value);
    if (!(n >= low && n <= high)) throw new RangeError(`${name} value is out of range.`);
    return Math.floor(n);
  };
  function numberFormat(locales, options) {
    const { tag, rules } = localeOf(locales);
    const o = options === undefined ? {} : Object(options);
    for (const key of Object.keys(o)) {
      if (o[key] !== undefined && !KNOWN_NUMBER_OPTIONS.includes(key)) {
        throw unsupported(`the number format option ${JSON.stringify(key)}`);
      }
    }
    if (o.numberingSystem !== undefined && String(o.numberingSystem) !== "latn") {
      throw unsupported(`the numbering system ${JSON.stringify(String(o.numberingSystem))}`);
    }
    const style = o.style === undefined ? "decimal" : String(o.style);
    if (!["decimal", "percent", "currency", "unit"].includes(style)) {
      throw new RangeError(`Value ${style} out of range for Intl.NumberFormat options property style`);
    }
    const notation = o.notation === undefined ? "standard" : String(o.notation);
    if (notation !== "standard" && notation !== "compact") {
      throw unsupported(`the number notation ${JSON.stringify(notation)}`);
    }
    const compact = notation === "compact";
    if (compact && rules.compact === null) {
      throw unsupported(`compact numbers in ${JSON.stringify(tag)} (it writes them in en-US and en-GB)`);
    }
    const compactDisplay = o.compactDisplay === undefined ? "short" : String(o.compactDisplay);
    const signDisplay = o.signDisplay === undefined ? "auto" : String(o.signDisplay);
    if (!["auto", "always", "never", "exceptZero", "negative"].includes(signDisplay)) {
      throw new RangeError(`Value ${signDisplay} out of range for Intl.NumberFormat options property signDisplay`);
    }

    let symbol = "";
    let unitPatterns = null;
    let defaultFraction = [0, 3];
    const code = o.currency === undefined ? undefined : String(o.currency).toUpperCase();
    if (style === "currency") {
      if (code === undefined) throw new TypeError("Currency code is required with currency style.");
      if (!/^[A-Z]{3}$/.test(code)) throw new RangeError(`Invalid currency code : ${o.currency}`);
      const display = o.currencyDisplay === undefined ? "symbol" : String(o.currencyDisplay);
      if (display === "code") symbol = code;
      else if (display === "symbol" && rules.symbols[code] !== undefined) symbol = rules.symbols[code];
      else if (display === "symbol") {
        throw unsupported(
          `the symbol of the currency ${code} (it knows ${
            Object.keys(SYMBOLS_EN).join(", ")
          }; currencyDisplay: "code" writes any)`,
        );
      } else throw unsupported(`the currency display ${JSON.stringify(display)} (it writes "symbol" and "code")`);
      defaultFraction = NO_FRACTION[code] === true ? [0, 0] : [2, 2];
    } else if (style === "percent") {
      defaultFraction = [0, 0];
    } else if (style === "unit") {
      if (o.unit === undefined) throw new TypeError("Unit is required with unit style.");
      const unit = String(o.unit);
      const display = o.unitDisplay === undefined ? "short" : String(o.unitDisplay);
      const at = ["short", "long", "narrow"].indexOf(display);
      if (at < 0) {
        throw new RangeError(`Value ${display} out of range for Intl.NumberFormat options property unitDisplay`);
      }
      if (rules.units === null) {
        throw unsupported(`units in ${JSON.stringify(tag)} (it writes them in en-US and en-GB)`);
      }
      const row = rules.units[unit];
      if (row === undefined) {
        throw unsupported(`the unit ${JSON.stringify(unit)} (it knows ${Object.keys(UNITS_EN_US).join(", ")})`);
      }
      const patterns = row.split("|");
      unitPatterns = [patterns[2 * at], patterns[2 * at + 1]];
    }

    // The digits: fraction digits, significant digits, or compact's own rule.
    const significant = o.minimumSignificantDigits !== undefined || o.maximumSignificantDigits !== undefined;
    const fractionGiven = o.minimumFractionDigits !== undefined || o.maximumFractionDigits !== undefined;
    const digits = {
      significant,
      compact: false,
      min: 0,
      max: 0,
      minInteger: o.minimumIntegerDigits === undefined
        ? 1
        : inRange(o.minimumIntegerDigits, 1, 21, "minimumIntegerDigits"),
    };
    if (significant) {
      digits.min = o.minimumSignificantDigits === undefined
        ? 1
        : inRange(o.minimumSignificantDigits, 1, 21, "minimumSignificantDigits");
      digits.max = o.maximumSignificantDigits === undefined
        ? 21
        : inRange(o.maximumSignificantDigits, digits.min, 21, "maximumSignificantDigits");
    } else if (compact && !fractionGiven) {
      digits.compact = true;
    } else {
      const [low, high] = compact ? [0, 3] : defaultFraction;
      digits.min = o.minimumFractionDigits === undefined
        ? Math.min(
          low,
          o.maximumFractionDigits === undefined
            ? low
            : inRange(o.maximumFractionDigits, 0, 100, "maximumFractionDigits"),
        )
        : inRange(o.minimumFractionDigits, 0, 100, "minimumFractionDigits");
      digits.max = o.maximumFractionDigits === undefined
        ? Math.max(high, digits.min)
        : inRange(o.maximumFractionDigits, 0, 100, "maximumFractionDigits");
      if (digits.max < digits.min) throw new RangeError("maximumFractionDigits value is out of range.");
    }
    const grouping = o.useGrouping === undefined
      ? (compact ? "min2" : "auto")
      : o.useGrouping === false || o.useGrouping === "false"
      ? false
      : String(o.useGrouping) === "min2"
      ? "min2"
      : "auto";
    const minimumGroup = grouping === "min2" ? 5 : 4;
    const names = compact
      ? (compactDisplay === "long" ? ["", " thousand", " million", " billion", " trillion"] : rules.compact)
      : null;

    const number = (d) => {
      const r = rounded(d, digits);
      const { whole, fraction } = wholeAndFraction(r, digits);
      const amount = grouping === false ? whole : grouped(whole, rules.group, minimumGroup);
      return { text: fraction === "" ? amount : amount + rules.decimal + fraction, zero: r.digits === "" };
    };
    const format = (value) => {
      const n = typeof value === "bigint" ? Number(value) : Number(value);
      if (Number.isNaN(n)) return "NaN";
      const negative = n < 0 || Object.is(n, -0);
      let body;
      let zero = false;
      if (!Number.isFinite(n)) body = "∞";
      else {
        let d = decimal(Math.abs(n));
        if (style === "percent") d = { digits: d.digits, point: d.point + 2 };
        let scale = 0;
        if (compact && d.digits !== "") {
          scale = Math.min(Math.max(Math.floor((d.point - 1) / 3), 0), 4);
          // 999.9 rounds to 1000: that is "1K", not "1000".
          if (rounded({ digits: d.digits, point: d.point - 3 * scale }, digits).point > 3 && scale < 4) scale++;
        }
        const shown = number({ digits: d.digits, point: d.point - 3 * scale });
        zero = shown.zero;
        body = shown.text + (compact ? names[scale] : "");
      }
      const sign = signDisplay === "never"
        ? ""
        : negative && (signDisplay !== "exceptZero" || !zero)
        ? "-"
        : (signDisplay === "always" || (signDisplay === "exceptZero" && !zero))
        ? "+"
        : "";
      if (style === "currency") {
        if (rules.symbolFirst) return `${sign}${symbol}${/[A-Za-z]$/.test(symbol) ? "\u00a0" : ""}${body}`;
        return `${sign}${body}\u00a0${symbol}`;
      }
      if (style === "percent") return `${sign}${body}${rules.percent}`;
      if (style === "unit") return unitPatterns[body === "1" ? 0 : 1].replace("{0}", sign + body);
      return sign + body;
    };
    const resolved = {
      locale: tag,
      numberingSystem: "latn",
      style,
      minimumIntegerDigits: digits.minInteger,
      useGrouping: grouping,
      notation,
      signDisplay,
    };
    if (significant) {
      resolved.minimumSignificantDigits = digits.min;
      resolved.maximumSignificantDigits = digits.max;
    } else if (!digits.compact) {
      resolved.minimumFractionDigits = digits.min;
      resolved.maximumFractionDigits = digits.max;
    }
    if (style === "currency") resolved.currency = code;
    if (style === "unit") resolved.unit = String(o.unit);
    if (compact) resolved.compactDisplay = compactDisplay;
    return { format, resolved };
  }

  // ---- dates and times ------------------------------------------------------------------------
  const MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
  ];
  const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
  const KNOWN_DATE_OPTIONS = [
    "dateStyle",
    "timeStyle",
    "year",
    "month",
    "day",
    "weekday",
    "hour",
    "minute",
    "second",
    "hour12",
    "timeZone",
    "localeMatcher",
    "formatMatcher",
    "calendar",
    "numberingSystem",
  ];
  const UTC_NAMES = ["UTC", "ETC/UTC", "GMT", "ETC/GMT", "Z"];
  const two = (n) => (n < 10 ? "0" : "") + n;
  function dateFormat(locales, options, defaults) {
    const { tag, rules } = localeOf(locales);
    const o = options === undefined ? {} : Object(options);
    for (const key of Object.keys(o)) {
      if (o[key] !== undefined && !KNOWN_DATE_OPTIONS.includes(key)) {
        throw unsupported(`the date format option ${JSON.stringify(key)}`);
      }
    }
    if (o.timeZone !== undefined && !UTC_NAMES.includes(String(o.timeZone).toUpperCase())) {
      throw unsupported(`the time zone ${JSON.stringify(String(o.timeZone))} (times are UTC)`);
    }
    if (o.calendar !== undefined && String(o.calendar) !== "gregory") {
      throw unsupported(`the calendar ${JSON.stringify(String(o.calendar))}`);
    }
    const FIELDS = ["year", "month", "day", "weekday", "hour", "minute", "second"];
    let fields = 0;
    for (let i = 0; i < FIELDS.length; i++) if (o[FIELDS[i]] !== undefined) fields++;
    const hasStyle = o.dateStyle !== undefined || o.timeStyle !== undefined;
    const parts = fields || hasStyle ? o : defaults;
    const en = rules.language === "en";
    const h12 = o.hour12 === undefined ? rules.h12 : Boolean(o.hour12);
    const time = (d, seconds) => {
      const h = d.getUTCHours();
      const hour = h12 ? (h % 12 === 0 ? 12 : h % 12) : h;
      const padded = !h12 || parts.hour === "2-digit" ? two(hour) : String(hour);
      if (h12 && rules.ampm === null) throw unsupported(`a 12-hour clock in ${JSON.stringify(tag)}`);
      const hm = `${padded}:${two(d.getUTCMinutes())}`;
      return hm + (seconds ? `:${two(d.getUTCSeconds())}` : "") + (h12 ? rules.ampm[h < 12 ? 0 : 1] : "");
    };
    const numericDate = (d, shortYear, padded) => {
      const y = shortYear ? two(d.getUTCFullYear() % 100) : String(d.getUTCFullYear());
      const pad = padded || rules.padDate;
      const m = pad ? two(d.getUTCMonth() + 1) : String(d.getUTCMonth() + 1);
      const day = pad ? two(d.getUTCDate()) : String(d.getUTCDate());
      const sep = rules.dateSep;
      return rules.date === "mdy" ? `${m}${sep}${day}${sep}${y}` : `${day}${sep}${m}${sep}${y}`;
    };
    // "April 2, 2024" or "2 April 2024", and the parts of it asked for: "April", "Apr 2024",
    // "April 2", with a weekday before it: "Tuesday, April 2, 2024", "Tuesday, 2 April 2024".
    const wordDate = (d, month, weekday, year = true, day = true) => {
      if (!en) {
        throw unsupported(`a date with month names in ${JSON.stringify(tag)} (it writes them in en-US and en-GB)`);
      }
      const name = month === "long" ? MONTHS[d.getUTCMonth()] : MONTHS[d.getUTCMonth()].slice(0, 3);
      let date;
      if (rules.dayWords) {
        date = day ? `${d.getUTCDate()} ${name}` : name;
        if (year) date = `${date} ${d.getUTCFullYear()}`;
      } else {
        date = day ? `${name} ${d.getUTCDate()}` : name;
        if (year) date = day ? `${date}, ${d.getUTCFullYear()}` : `${date} ${d.getUTCFullYear()}`;
      }
      if (!weekday) return date;
      const dayName = weekday === "long" ? DAYS[d.getUTCDay()] : DAYS[d.getUTCDay()].slice(0, 3);
      return `${dayName}, ${date}`;
    };
    // Numeric parts of a date that are not all three: "2024", "4/2024", "4/2", "2".
    const numericParts = (d, year, month, day) => {
      if (year && month && day) {
        return numericDate(d, parts.year === "2-digit", parts.month === "2-digit" || parts.day === "2-digit");
      }
      if (!en) throw unsupported(`a date of only some of year, month and day in ${JSON.stringify(tag)}`);
      const m = rules.padDate || parts.month === "2-digit" ? two(d.getUTCMonth() + 1) : String(d.getUTCMonth() + 1);
      const dd = (rules.padDate && month) || parts.day === "2-digit" ? two(d.getUTCDate()) : String(d.getUTCDate());
      const y = parts.year === "2-digit" ? two(d.getUTCFullYear() % 100) : String(d.getUTCFullYear());
      const shown = [];
      if (rules.date === "mdy") {
        if (month) shown.push(m);
        if (day) shown.push(dd);
      } else {
        if (day) shown.push(dd);
        if (month) shown.push(m);
      }
      if (year) shown.push(y);
      return shown.join("/");
    };
    const format = (value) => {
      // A date with the month's whole name is joined to its time with " at ".
      let wordy = false;
      const d = value === undefined ? new Date() : new Date(value instanceof Date ? value.getTime() : value);
      if (Number.isNaN(d.getTime())) throw new RangeError("Invalid time value");
      const out = [];
      if (parts.dateStyle !== undefined) {
        const style = String(parts.dateStyle);
        if (style === "short") out.push(numericDate(d, !rules.padDate || !en, false));
        else if (style === "medium") out.push(en ? wordDate(d, "short") : numericDate(d, false, true));
        else if (style === "long") {
          out.push(wordDate(d, "long"));
          wordy = true;
        } else if (style === "full") {
          out.push(wordDate(d, "long", "long"));
          wordy = true;
        } else throw new RangeError(`Value ${style} out of range for Intl.DateTimeFormat options property dateStyle`);
      } else if (
        parts.year !== undefined || parts.month !== undefined || parts.day !== undefined || parts.weekday !== undefined
      ) {
        const month = parts.month === undefined ? undefined : String(parts.month);
        const asked = fields === 0;
        wordy = month === "long";
        if (month === "long" || month === "short") {
          out.push(
            wordDate(d, month, parts.weekday, asked || parts.year !== undefined, asked || parts.day !== undefined),
          );
        } else if (parts.weekday !== undefined && month === undefined && parts.day === undefined) {
          out.push(parts.weekday === "long" ? DAYS[d.getUTCDay()] : DAYS[d.getUTCDay()].slice(0, 3));
        } else if (asked) out.push(numericDate(d, parts.year === "2-digit", false));
        else out.push(numericParts(d, parts.year !== undefined, month !== undefined, parts.day !== undefined));
      }
      if (parts.timeStyle !== undefined) out.push(time(d, String(parts.timeStyle) !== "short"));
      else if (parts.hour !== undefined || parts.minute !== undefined) out.push(time(d, parts.second !== undefined));
      return out.join(wordy && en && out.length === 2 ? " at " : ", ");
    };
    return { format, resolved: { locale: tag, calendar: "gregory", numberingSystem: "latn", timeZone: "UTC" } };
  }

  // Sorting text: letters compare without accents and case first, then by accents, then
  // lowercase before uppercase, as ICU's root collation does for Latin text; `numeric` compares
  // runs of digits as numbers; `sensitivity` stops at the level asked for.
  const MARKS = /[\u0300-\u036f]/g;
  const PUNCTUATION = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
  function collator(locales, options) {
    const { tag } = localeOf(locales);
    const o = options === undefined ? {} : Object(options);
    const numeric = Boolean(o.numeric);
    const sensitivity = o.sensitivity === undefined ? "variant" : String(o.sensitivity);
    const caseFirst = o.caseFirst === undefined ? "false" : String(o.caseFirst);
    const split = (s) => (numeric ? s.match(/\d+|\D+/g) || [] : [s]);
    const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
    const level = (x, y, key) => {
      const xs = split(x), ys = split(y);
      for (let i = 0; i < Math.min(xs.length, ys.length); i++) {
        const p = xs[i], q = ys[i];
        if (numeric && /^\d/.test(p) && /^\d/.test(q)) {
          const d = cmp(Number(p), Number(q));
          if (d !== 0) return d;
          continue;
        }
        const d = cmp(key(p), key(q));
        if (d !== 0) return d;
      }
      return cmp(xs.length, ys.length);
    };
    // ICU's root order puts spaces, then punctuation and symbols (in this order), then digits,
    // before letters; code units would put `_` after the digits and capitals.
    const ranked = (s) => {
      let out = "";
      for (const c of s) {
        const p = PUNCTUATION.indexOf(c);
        if (c === " " || c === "\t" || c === "\n" || c === "\r") out += "\u0001" + c;
        else if (p >= 0) out += "\u0002" + String.fromCharCode(0x21 + p);
        else if (c >= "0" && c <= "9") out += "\u0003" + c;
        else out += c;
      }
      return out;
    };
    const base = (s) => ranked(s.normalize("NFD").replace(MARKS, "").toLowerCase());
    const accents = (s) => ranked(s.normalize("NFD").toLowerCase());
    const compare = (a, b) => {
      const x = String(a), y = String(b);
      const primary = level(x, y, base);
      if (primary !== 0 || sensitivity === "base") return primary;
      if (sensitivity !== "case") {
        const secondary = level(x, y, accents);
        if (secondary !== 0 || sensitivity === "accent") return secondary;
      }
      // Lowercase first, unless asked otherwise.
      const swap = (s) => {
        let out = "";
        for (const c of s) out += c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase();
        return out;
      };
      return caseFirst === "upper" ? level(x, y, (s) => s) : level(x, y, swap);
    };
    return {
      compare,
      resolved: {
        locale: tag,
        usage: "sort",
        sensitivity,
        ignorePunctuation: false,
        collation: "default",
        numeric,
        caseFirst,
      },
    };
  }

  // Plural categories, as CLDR gives them for the supported locales.
  function pluralRules(locales, options) {
    const { tag } = localeOf(locales);
    const language = tag.split("-")[0].toLowerCase();
    const o = options === undefined ? {} : Object(options);
    const type = o.type === undefined ? "cardinal" : String(o.type);
    if (type !== "cardinal" && type !== "ordinal") {
      throw new RangeError(`Value ${type} out of range for Intl.PluralRules options property type`);
    }
    const select = (value) => {
      const n = Math.abs(Number(value));
      const whole = Number.isInteger(n);
      if (type === "ordinal") {
        if (language !== "en") return language === "fr" && n === 1 ? "one" : "other";
        const ten = n % 10, hundred = n % 100;
        if (!whole) return "other";
        if (ten === 1 && hundred !== 11) return "one";
        if (ten === 2 && hundred !== 12) return "two";
        if (ten === 3 && hundred !== 13) return "few";
        return "other";
      }
      if (language === "fr") {
        if (Math.floor(n) === 0 || Math.floor(n) === 1) return "one";
        return whole && n !== 0 && n % 1000000 === 0 ? "many" : "other";
      }
      return n === 1 && whole ? "one" : "other";
    };
    return { select, resolved: { locale: tag, type } };
  }

  // "in 2 days", "3 months ago", and with numeric: "auto", "yesterday", "next week" (en).
  const RELATIVE_UNITS = ["second", "minute", "hour", "day", "week", "month", "quarter", "year"];
  const RELATIVE_WORDS = {
    day: ["yesterday", "today", "tomorrow"],
    week: ["last week", "this week", "next week"],
    month: ["last month", "this month", "next month"],
    quarter: ["last quarter", "this quarter", "next quarter"],
    year: ["last year", "this year", "next year"],
    second: [undefined, "now", undefined],
    minute: [undefined, "this minute", undefined],
    hour: [undefined, "this hour", undefined],
  };
  function relativeTimeFormat(locales, options) {
    const { tag, rules } = localeOf(locales);
    if (rules.language !== "en") {
      throw unsupported(`Intl.RelativeTimeFormat in ${JSON.stringify(tag)} (it writes en-US and en-GB)`);
    }
    const o = options === undefined ? {} : Object(options);
    const numeric = o.numeric === undefined ? "always" : String(o.numeric);
    const style = o.style === undefined ? "long" : String(o.style);
    if (style !== "long") throw unsupported(`the relative time style ${JSON.stringify(style)} (it formats "long")`);
    const numbers = numberFormat(locales, { maximumFractionDigits: 3 });
    const format = (value, unit) => {
      const n = Number(value);
      let name = String(unit);
      if (name.endsWith("s")) name = name.slice(0, -1);
      if (!RELATIVE_UNITS.includes(name)) throw new RangeError(`Invalid unit argument for format() '${String(unit)}'`);
      if (!Number.isFinite(n)) throw new RangeError("Invalid number value");
      if (numeric === "auto" && (n === -1 || n === 0 || n === 1) && !Object.is(n, -0)) {
        const word = RELATIVE_WORDS[name][n + 1];
        if (word !== undefined) return word;
      }
      const amount = numbers.format(Math.abs(n));
      const label = Math.abs(n) === 1 ? name : `${name}s`;
      return n < 0 || Object.is(n, -0) ? `${amount} ${label} ago` : `in ${amount} ${label}`;
    };
    return { format, resolved: { locale: tag, style, numeric, numberingSystem: "latn" } };
  }

  // ---- lists ------------------------------------------------------------------------------------
  function listFormat(locales, options) {
    const { tag, rules } = localeOf(locales);
    const o = options === undefined ? {} : Object(options);
    const type = o.type === undefined ? "conjunction" : String(o.type);
    const style = o.style === undefined ? "long" : String(o.style);
    if (rules.lists[type] === undefined) {
      throw new RangeError(`Value ${type} out of range for Intl.ListFormat options property type`);
    }
    const pattern = rules.lists[type][style];
    if (pattern === undefined) {
      throw new RangeError(`Value ${style} out of range for Intl.ListFormat options property style`);
    }
    const [pair, middle, end] = pattern;
    const format = (list) => {
      const items = [];
      if (list !== undefined) {
        for (const item of list) {
          if (typeof item !== "string") throw new TypeError(`Iterable yielded ${String(item)} which is not a string`);
          items.push(item);
        }
      }
      if (items.length < 2) return items.length === 0 ? "" : items[0];
      if (items.length === 2) return items[0] + pair + items[1];
      return items.slice(0, -1).join(middle) + end + items[items.length - 1];
    };
    return { format, resolved: { locale: tag, type, style } };
  }

  // Each formatter is a function that makes its object with `new` or without, as `Intl`'s do.
  const made = (make) => {
    function Format(locales, options) {
      const { format, compare, select, resolved } = make(locales, options);
      const self = Object.create(Format.prototype);
      if (format) self.format = (value, unit) => format(value, unit);
      if (compare) self.compare = (a, b) => compare(a, b);
      if (select) self.select = (value) => select(value);
      self.formatToParts = () => {
        throw unsupported("formatToParts");
      };
      self.resolvedOptions = () => ({ ...resolved });
      return self;
    }
    Format.supportedLocalesOf = (locales) => {
      const list = locales === undefined ? [] : Array.isArray(locales) ? locales : [locales];
      const found = [];
      for (let i = 0; i < list.length; i++) {
        try {
          found.push(localeOf(list[i]).tag);
        } catch (_) { /* not supported here */ }
      }
      return found;
    };
    return Format;
  };
  const exports = {};
  exports.Intl = freeze({
    NumberFormat: made(numberFormat),
    DateTimeFormat: made((locales, options) =>
      dateFormat(locales, options, { year: "numeric", month: "numeric", day: "numeric" })
    ),
    Collator: made(collator),
    PluralRules: made(pluralRules),
    RelativeTimeFormat: made(relativeTimeFormat),
    ListFormat: made(listFormat),
    getCanonicalLocales: (locales) => {
      const list = locales === undefined ? [] : Array.isArray(locales) ? locales : [locales];
      const tags = [];
      for (let i = 0; i < list.length; i++) tags.push(localeOf(list[i]).tag);
      return tags;
    },
  });
  exports.localeCompare = (a, b, locales, options) => collator(locales, options).compare(a, b);
  exports.numberToLocale = (n, locales, options) => numberFormat(locales, options).format(n);
  exports.dateToLocale = (d, which, locales, options) => {
    const defaults = which === "date"
      ? { year: "numeric", month: "numeric", day: "numeric" }
      : which === "time"
      ? { hour: "numeric", minute: "numeric", second: "numeric" }
      : { year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric" };
    // A date's own methods say "Invalid Date", where a formatter throws.
    return Number.isNaN(d.getTime()) ? "Invalid Date" : dateFormat(locales, options, defaults).format(d);
  };
  return exports;
}
