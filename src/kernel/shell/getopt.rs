//! The one option parser: GNU getopt, for the grammars of [`super::grammars`].

use super::words::Arg;

/// How a program takes its options.
pub(super) struct Grammar {
    /// Short options that take an argument, attached (`-n10`) or next
    /// (`-n 10`).
    pub with_arg: &'static str,
    /// Short options whose argument, if any, is attached (`xargs -i{}`,
    /// `sed -i.bak`).
    pub optional_arg: &'static str,
    /// Long options that take an argument, `--name=value` or `--name value`.
    /// An unambiguous prefix (`--kill` for `--kill-after`) counts too, as
    /// GNU getopt takes it.
    pub long_with_arg: &'static [&'static str],
    /// Long options that take no argument and are a prefix of one that
    /// does (`install --strip`, `--strip-program`): without them the
    /// prefix rule would take the next word as their argument.
    pub long_flags: &'static [&'static str],
    /// Options may follow operands, as GNU getopt permutes them (`cp a b
    /// -v`). Without it the options end at the first operand, as with a
    /// leading `+`: what follows a wrapper's command is that command's.
    pub permute: bool,
}

impl Grammar {
    /// No option takes an argument; the options end at the first operand.
    pub const NONE: Grammar = Grammar::stop("", &[]);

    /// Options end at the first operand; `with_arg` and `long_with_arg` as
    /// in the fields of the same names.
    pub const fn stop(with_arg: &'static str, long_with_arg: &'static [&'static str]) -> Grammar {
        Grammar {
            with_arg,
            optional_arg: "",
            long_with_arg,
            long_flags: &[],
            permute: false,
        }
    }

    /// Options and operands in any order.
    pub const fn permute(
        with_arg: &'static str,
        long_with_arg: &'static [&'static str],
    ) -> Grammar {
        Grammar {
            permute: true,
            ..Grammar::stop(with_arg, long_with_arg)
        }
    }

    /// Parses `args`. Option words are read by their text, whether or not
    /// it is known before the command runs: `-$x` is an option cluster.
    pub fn parse(&self, args: &[Arg]) -> Options {
        let mut given = Vec::new();
        let mut operands = Vec::new();
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            let t = arg.text.as_str();
            if t == "--" {
                operands.extend(i + 1..args.len());
                break;
            }
            if !(t.len() > 1 && t.starts_with('-')) {
                if !self.permute {
                    operands.extend(i..args.len());
                    break;
                }
                operands.push(i);
                i += 1;
                continue;
            }
            let word = i;
            i += 1;
            if let Some(name) = t.strip_prefix("--") {
                let (name, attached) = match name.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (name, None),
                };
                let takes = self.takes(name);
                let value = match attached {
                    Some(text) => Some(Value {
                        word,
                        text: Some(text.to_owned()),
                    }),
                    None if takes.is_some() => {
                        i += 1;
                        (i - 1 < args.len()).then_some(Value {
                            word: i - 1,
                            text: None,
                        })
                    }
                    None => None,
                };
                given.push(Opt {
                    name: name.to_owned(),
                    long: true,
                    full: takes,
                    value,
                });
                continue;
            }
            let cluster = &t[1..];
            for (at, c) in cluster.char_indices() {
                let rest = &cluster[at + c.len_utf8()..];
                let attached = (!rest.is_empty()).then(|| Value {
                    word,
                    text: Some(rest.to_owned()),
                });
                let (value, ends) = if self.with_arg.contains(c) {
                    let value = attached.or_else(|| {
                        i += 1;
                        (i - 1 < args.len()).then_some(Value {
                            word: i - 1,
                            text: None,
                        })
                    });
                    (value, true)
                } else if self.optional_arg.contains(c) {
                    (attached, true)
                } else {
                    (None, false)
                };
                given.push(Opt {
                    name: c.to_string(),
                    long: false,
                    full: None,
                    value,
                });
                if ends {
                    break;
                }
            }
        }
        Options { given, operands }
    }

    /// The long option `name` (as written) takes an argument: its full
    /// name. An exact name wins over a prefix of a longer one.
    fn takes(&self, name: &str) -> Option<&'static str> {
        let names = || {
            self.long_with_arg
                .iter()
                .filter_map(|o| o.strip_prefix("--"))
        };
        if let Some(exact) = names().find(|o| *o == name) {
            return Some(exact);
        }
        if name.is_empty()
            || self
                .long_flags
                .iter()
                .any(|f| f.strip_prefix("--") == Some(name))
        {
            return None;
        }
        names().find(|o| o.starts_with(name))
    }
}

/// A shell's options, read as bash reads them: `-o NAME` and `-O NAME`
/// take the next word whatever follows them in their cluster, `+` turns
/// options off (its letters count as given), `--rcfile FILE` and
/// `--init-file FILE` take the next word and other long options none, and
/// `-` ends the options like `--`. That is not getopt, so it is not a
/// [`Grammar`].
pub(super) fn shell_options(args: &[Arg]) -> Options {
    let next = |i: usize| {
        (i < args.len()).then_some(Value {
            word: i,
            text: None,
        })
    };
    let mut given = Vec::new();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let t = arg.text.as_str();
        i += 1;
        if t == "--" || t == "-" {
            break;
        }
        if let Some(name) = t.strip_prefix("--") {
            let full = ["rcfile", "init-file"].into_iter().find(|f| *f == name);
            let value = full.and_then(|_| {
                i += 1;
                next(i - 1)
            });
            given.push(Opt {
                name: name.to_owned(),
                long: true,
                full,
                value,
            });
            continue;
        }
        if !(t.len() > 1 && (t.starts_with('-') || t.starts_with('+'))) {
            i -= 1;
            break;
        }
        for c in t[1..].chars() {
            let value = matches!(c, 'o' | 'O').then(|| {
                i += 1;
                next(i - 1)
            });
            given.push(Opt {
                name: c.to_string(),
                long: false,
                full: None,
                value: value.flatten(),
            });
        }
    }
    Options {
        given,
        operands: (i..args.len()).collect(),
    }
}

/// A command's options, as its program's grammar parses them.
///
/// Options are named as in [`Options::has`]: a one-letter name is a short
/// option (`"p"` for `-p`), a longer one a long option without its dashes
/// (`"pid"` for `--pid`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    given: Vec<Opt>,
    /// The operands (words that are not options or their arguments), as
    /// indices into the words parsed, in order. With a grammar whose
    /// options end at the first operand, every word from that one on.
    pub operands: Vec<usize>,
}

/// One option as given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Opt {
    /// The letter, or the long name as written (without `--` and `=value`).
    name: String,
    long: bool,
    /// The grammar's full name for a long option that takes an argument.
    full: Option<&'static str>,
    value: Option<Value>,
}

/// The argument of an option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The word that holds it, as an index into the words parsed.
    pub word: usize,
    /// Its text when it is only part of that word (`-n10`, `--name=value`);
    /// `None` when it is the whole word.
    pub text: Option<String>,
}

impl Options {
    /// The first operand, where a wrapper's command starts.
    pub fn next(&self) -> Option<usize> {
        self.operands.first().copied()
    }

    /// Whether one of `names` was given; a long option also when written
    /// as a prefix of two or more letters (`--ver` for `--verbose`).
    pub fn has(&self, names: &[&str]) -> bool {
        self.given.iter().any(|o| {
            names.iter().any(|n| {
                if o.long {
                    n.len() > 1 && o.name.len() >= 2 && n.starts_with(o.name.as_str())
                } else {
                    *n == o.name
                }
            })
        })
    }

    /// Whether one of `names` was given, a long option spelt out in full.
    pub fn has_exactly(&self, names: &[&str]) -> bool {
        self.given.iter().any(|o| {
            names
                .iter()
                .any(|n| *n == o.name && o.long == (n.len() > 1))
        })
    }

    /// The arguments given to any of `names` (a long option under the
    /// grammar's full name), in order.
    pub fn values<'a>(&'a self, names: &'a [&'a str]) -> impl Iterator<Item = &'a Value> + 'a {
        self.given.iter().filter_map(move |o| {
            let name = if o.long { o.full? } else { o.name.as_str() };
            names.contains(&name).then_some(o.value.as_ref()).flatten()
        })
    }

    /// The argument of the last of `names` given.
    pub fn value<'a>(&'a self, names: &'a [&'a str]) -> Option<&'a Value> {
        self.values(names).last()
    }

    /// The same options with every index moved by `by`: for words parsed
    /// from a later start (a wrapper's arguments within its command's words).
    pub fn shifted(mut self, by: usize) -> Options {
        for o in &mut self.given {
            if let Some(v) = &mut o.value {
                v.word += by;
            }
        }
        for w in &mut self.operands {
            *w += by;
        }
        self
    }
}

impl Value {
    /// The argument as a word of `args` (the words parsed).
    pub(super) fn arg(&self, args: &[Arg]) -> Arg {
        let word = &args[self.word];
        Arg {
            text: self.text.clone().unwrap_or_else(|| word.text.clone()),
            dynamic: word.dynamic,
        }
    }
}
