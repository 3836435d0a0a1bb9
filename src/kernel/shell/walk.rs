//! The walk over bash's syntax tree that lists a line's commands, in the
//! order the module doc gives, and into what wrappers run.

use super::words::{chars, snippet, Arg, Quoting};
use super::wrappers::{self, Inner};
use super::{grammars, Analysis, Command, Redirect, Run, RunKind, MAX_DEPTH};
use brush_parser::ast;
use brush_parser::word;
use brush_parser::{Parser, ParserOptions};

/// [`super::analyze`], on the thread it starts.
pub(super) fn analyze(line: &str) -> Analysis {
    let mut walker = Walker {
        options: ParserOptions::default(),
        out: Vec::new(),
        env: Vec::new(),
        fed: false,
        exec_fed: false,
    };
    match walker.script(line, 0) {
        Ok(()) => Analysis::Parsed(walker.out),
        Err(reason) => Analysis::Unparsed { reason },
    }
}

/// A simple command's parts, gathered in order.
#[derive(Default)]
struct Parts {
    words: Vec<Arg>,
    env: Vec<String>,
    redirects: Vec<Redirect>,
    /// The last here-document or here-string on standard input.
    stdin: Option<Arg>,
    /// Some redirection gives it data on standard input.
    fed: bool,
}

/// What a redirection contributes to its command.
enum Redir {
    None,
    File(Redirect),
    /// A here-document or here-string on standard input: its text.
    Stdin(Arg),
}

/// A step of the walk: an error makes the line [`Analysis::Unparsed`], with
/// the error as its reason.
pub(super) type Walk<T = ()> = Result<T, String>;

/// Where the walk is, and what it has listed so far.
pub(super) struct Walker {
    pub options: ParserOptions,
    out: Vec<Command>,
    /// The assignments in effect where the walk is (see [`Command::env`]).
    env: Vec<String>,
    /// Standard input may carry data where the walk is (see
    /// [`Command::fed`]).
    fed: bool,
    /// An `exec <file` redirected the shell's standard input for the rest
    /// of the line.
    exec_fed: bool,
}

impl Walker {
    // ---- the syntax tree -------------------------------------------------

    pub(super) fn script(&mut self, src: &str, depth: usize) -> Walk {
        let depth = deeper(depth)?;
        let program = Parser::new(src.as_bytes(), &self.options)
            .parse_program()
            .map_err(|e| {
                if depth == 1 {
                    e.to_string()
                } else {
                    format!("{e} in `{}`", snippet(src))
                }
            })?;
        for list in &program.complete_commands {
            self.list(list, src, depth)?;
        }
        Ok(())
    }

    pub(super) fn list(&mut self, list: &ast::CompoundList, src: &str, depth: usize) -> Walk {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, src, depth)?;
            for next in &and_or.additional {
                let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                self.pipeline(p, src, depth)?;
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, src: &str, depth: usize) -> Walk {
        for (i, command) in pipeline.seq.iter().enumerate() {
            // After a `|`, standard input is the previous command's output.
            let fed = self.fed;
            self.fed |= i > 0;
            let walked = self.command(command, src, depth);
            self.fed = fed;
            walked?;
        }
        Ok(())
    }

    fn command(&mut self, command: &ast::Command, src: &str, depth: usize) -> Walk {
        let depth = deeper(depth)?;
        match command {
            ast::Command::Simple(simple) => self.simple(simple, src, depth),
            ast::Command::Compound(compound, redirects) => {
                self.redirects_only(redirects.as_ref(), src, depth)?;
                let fed = self.fed;
                self.fed |= redirects
                    .as_ref()
                    .is_some_and(|l| l.0.iter().any(feeds_stdin));
                let walked = self.compound(compound, src, depth);
                self.fed = fed;
                walked
            }
            ast::Command::Function(function) => {
                let ast::FunctionBody(compound, redirects) = &function.body;
                self.redirects_only(redirects.as_ref(), src, depth)?;
                self.compound(compound, src, depth)
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.redirects_only(redirects.as_ref(), src, depth)?;
                self.extended_test(&test.expr, depth)
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, src: &str, depth: usize) -> Walk {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(arith) => {
                // brush-parser reads nested subshells written `( (a) )` or
                // `((a) )` as `((a))`; bash reads `((` as arithmetic only
                // when the parentheses touch at both ends.
                let text = chars(src, &arith.loc);
                match text.strip_prefix("((").and_then(|t| t.strip_suffix("))")) {
                    Some(_) => self.scan(&arith.expr.value, depth),
                    None => {
                        let inner = text.strip_prefix('(').and_then(|t| t.strip_suffix(')'));
                        self.script(inner.unwrap_or(&text), depth)
                    }
                }
            }
            C::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.scan(&expr.value, depth)?;
                }
                self.list(&f.body.list, src, depth)
            }
            C::BraceGroup(group) => self.list(&group.list, src, depth),
            C::Subshell(subshell) => self.list(&subshell.list, src, depth),
            C::ForClause(f) => {
                for value in f.values.iter().flatten() {
                    self.scan(&value.value, depth)?;
                }
                self.list(&f.body.list, src, depth)
            }
            C::CaseClause(case) => {
                self.scan(&case.value.value, depth)?;
                for item in &case.cases {
                    for pattern in &item.patterns {
                        self.scan(&pattern.value, depth)?;
                    }
                    if let Some(list) = &item.cmd {
                        self.list(list, src, depth)?;
                    }
                }
                Ok(())
            }
            C::IfClause(clause) => {
                self.list(&clause.condition, src, depth)?;
                self.list(&clause.then, src, depth)?;
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, src, depth)?;
                    }
                    self.list(&other.body, src, depth)?;
                }
                Ok(())
            }
            C::WhileClause(clause) | C::UntilClause(clause) => {
                self.list(&clause.0, src, depth)?;
                self.list(&clause.1.list, src, depth)
            }
            C::Coprocess(coproc) => self.command(&coproc.body, src, depth),
        }
    }

    fn extended_test(&mut self, expr: &ast::ExtendedTestExpr, depth: usize) -> Walk {
        use ast::ExtendedTestExpr as E;
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a, depth)?;
                self.extended_test(b, depth)
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a, depth),
            E::UnaryTest(_, w) => self.scan(&w.value, depth),
            E::BinaryTest(_, a, b) => {
                self.scan(&a.value, depth)?;
                self.scan(&b.value, depth)
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, src: &str, depth: usize) -> Walk {
        // Listed before the commands nested in it: hold its place.
        let at = self.out.len();
        self.out.push(Command::new(&[], Vec::new(), false));
        let mut parts = Parts::default();
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, true, &mut parts, src, depth)?;
        }
        if let Some(name) = &simple.word_or_name {
            parts.words.push(self.word(&name.value, depth)?);
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, false, &mut parts, src, depth)?;
        }
        let Parts {
            words,
            env,
            redirects,
            stdin,
            fed,
        } = parts;
        if words.is_empty() {
            // A bare assignment stays in effect for the rest of the line,
            // and a variable such as PATH or HOME is already exported.
            self.keep(env.iter().map(String::as_str));
        }
        if words.is_empty() && redirects.is_empty() {
            // Nothing to spawn, nothing to open.
            self.unlist(at);
            return Ok(());
        }
        // A shell whose script is the here-document read here runs what
        // the analysis lists, not unknown input.
        let script_read =
            stdin.as_ref().is_some_and(|s| !s.dynamic) && wrappers::runs_stdin(&words);
        let fed = self.fed || self.exec_fed || (fed && !script_read);
        let mut all = self.env.clone();
        all.extend(env);
        let mut command = Command::new(&words, redirects, false);
        command.env = all.clone();
        command.fed = fed;
        self.out[at] = command;
        self.assigns(&words);
        if words.len() == 1 && words[0].text == "exec" && fed {
            // `exec <file`: the rest of the line reads that file.
            self.exec_fed = true;
        }
        self.unwrap(at, &words, stdin.as_ref(), depth, &all, fed)
    }

    /// Drops the place held at `at` for a command that turned out to list
    /// nothing of its own. Commands nested in it were listed after it, and
    /// those that run others were told where: one place earlier now.
    fn unlist(&mut self, at: usize) {
        self.out.remove(at);
        for command in &mut self.out[at..] {
            for run in &mut command.runs {
                if let Some(i) = run.command.as_mut().filter(|i| **i > at) {
                    *i -= 1;
                }
            }
        }
    }

    /// Keeps the assignments among `assignments` (`NAME=value`, as written)
    /// that set a variable of the table, for the rest of the line.
    fn keep<'a>(&mut self, assignments: impl Iterator<Item = &'a str>) {
        for a in assignments {
            let Some((name, _)) = a.split_once('=') else {
                // `export PATH` exports the value it already has.
                continue;
            };
            if crate::kernel::programs::var_of(name).is_some() {
                self.env.push(a.to_string());
            }
        }
    }

    /// What builtins that set variables (`export PAGER=x`, `declare -x`,
    /// `read PATH`, `printf -v HOME`) leave in effect for the rest of the
    /// line, as for a bare assignment.
    fn assigns(&mut self, words: &[Arg]) {
        let Some((name, args)) = words.split_first() else {
            return;
        };
        if name.dynamic {
            return;
        }
        match name.text.as_str() {
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                let set: Vec<String> = args
                    .iter()
                    .filter(|a| !a.text.starts_with(['-', '+']))
                    .map(|a| a.text.clone())
                    .collect();
                self.keep(set.iter().map(String::as_str));
            }
            "read" | "printf" | "mapfile" | "readarray" | "getopts" => {
                // Which word names the variable depends on the options;
                // any word that is a table name is taken to be one.
                let set: Vec<String> = args
                    .iter()
                    .filter(|a| crate::kernel::programs::var_of(&a.text).is_some())
                    .map(|a| format!("{}=$({})", a.text, name.text))
                    .collect();
                self.keep(set.iter().map(String::as_str));
            }
            _ => {}
        }
    }

    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        in_prefix: bool,
        parts: &mut Parts,
        src: &str,
        depth: usize,
    ) -> Walk {
        use ast::CommandPrefixOrSuffixItem as Item;
        match item {
            Item::AssignmentWord(assignment, w) if in_prefix => {
                parts.env.push(w.value.clone());
                self.assignment(assignment, depth)?
            }
            // After the name, `NAME=value` is an argument (`export A=b`).
            Item::AssignmentWord(_, w) | Item::Word(w) => {
                parts.words.push(self.word(&w.value, depth)?)
            }
            Item::IoRedirect(r) => {
                parts.fed |= feeds_stdin(r);
                match self.redirect(r, src, depth)? {
                    Redir::None => {}
                    Redir::File(r) => parts.redirects.push(r),
                    Redir::Stdin(text) => parts.stdin = Some(text),
                }
            }
            Item::ProcessSubstitution(kind, subshell) => {
                parts.words.push(Arg {
                    text: process_substitution_text(kind, subshell, src),
                    dynamic: true,
                });
                self.list(&subshell.list, src, depth)?;
            }
        }
        Ok(())
    }

    /// The redirections of a compound command, as a word-less command.
    fn redirects_only(
        &mut self,
        list: Option<&ast::RedirectList>,
        src: &str,
        depth: usize,
    ) -> Walk {
        let Some(list) = list else { return Ok(()) };
        let at = self.out.len();
        self.out.push(Command::new(&[], Vec::new(), false));
        let mut redirects = Vec::new();
        for r in &list.0 {
            if let Redir::File(r) = self.redirect(r, src, depth)? {
                redirects.push(r);
            }
        }
        if redirects.is_empty() {
            self.unlist(at);
        } else {
            self.out[at].redirects = redirects;
        }
        Ok(())
    }

    fn assignment(&mut self, assignment: &ast::Assignment, depth: usize) -> Walk {
        if let ast::AssignmentName::ArrayElementName(_, index) = &assignment.name {
            self.scan(index, depth)?;
        }
        match &assignment.value {
            ast::AssignmentValue::Scalar(w) => self.scan(&w.value, depth),
            ast::AssignmentValue::Array(items) => {
                for (key, value) in items {
                    if let Some(key) = key {
                        self.scan(&key.value, depth)?;
                    }
                    self.scan(&value.value, depth)?;
                }
                Ok(())
            }
        }
    }

    fn redirect(&mut self, redirect: &ast::IoRedirect, src: &str, depth: usize) -> Walk<Redir> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        Ok(match redirect {
            R::File(_, kind, target) => {
                let write = match kind {
                    K::Read | K::DuplicateInput => false,
                    K::Write | K::Append | K::ReadAndWrite | K::Clobber | K::DuplicateOutput => {
                        true
                    }
                };
                match target {
                    T::Filename(w) => Redir::File(self.target(&w.value, write, depth)?),
                    T::Fd(_) => Redir::None,
                    T::Duplicate(w) => {
                        // `2>&1`, `3>&-`, `4<&0`, `5>&6-` duplicate or close
                        // descriptors; `>&file` writes a file.
                        let r = self.target(&w.value, write, depth)?;
                        let t = r.target.trim_end_matches('-');
                        if !r.dynamic && t.bytes().all(|b| b.is_ascii_digit()) {
                            Redir::None
                        } else {
                            Redir::File(r)
                        }
                    }
                    T::ProcessSubstitution(_, subshell) => {
                        self.list(&subshell.list, src, depth)?;
                        Redir::None
                    }
                }
            }
            R::OutputAndError(w, _) => Redir::File(self.target(&w.value, true, depth)?),
            R::HereDocument(fd, doc) => {
                let text = if doc.requires_expansion {
                    let pieces = word::parse_heredoc(&doc.doc.value, &self.options)
                        .map_err(|e| format!("cannot parse a here-document: {e}"))?;
                    let mut value = String::new();
                    let dynamic = self.pieces(&pieces, Quoting::HereDocument, &mut value, depth)?;
                    Arg {
                        text: if dynamic {
                            doc.doc.value.clone()
                        } else {
                            value
                        },
                        dynamic,
                    }
                } else {
                    Arg {
                        text: doc.doc.value.clone(),
                        dynamic: false,
                    }
                };
                on_stdin(*fd, text)
            }
            R::HereString(fd, w) => {
                let arg = self.word(&w.value, depth)?;
                on_stdin(*fd, arg)
            }
        })
    }

    fn target(&mut self, raw: &str, write: bool, depth: usize) -> Walk<Redirect> {
        let arg = self.word(raw, depth)?;
        Ok(Redirect {
            write,
            target: arg.text,
            dynamic: arg.dynamic,
        })
    }

    // ---- wrappers --------------------------------------------------------

    /// Lists what the command at `at`, whose words are `words`, runs when
    /// it runs its arguments (or standard input) as a command, and notes on
    /// it how (see [`Command::runs`]) and its options. `env` and `fed` are
    /// the command's own (see [`Command`]): what it runs inherits them.
    fn unwrap(
        &mut self,
        at: usize,
        words: &[Arg],
        stdin: Option<&Arg>,
        depth: usize,
        env: &[String],
        fed: bool,
    ) -> Walk {
        let depth = deeper(depth)?;
        let Some((name, args)) = words.split_first() else {
            return Ok(());
        };
        if name.dynamic {
            return Ok(());
        }
        let program = name.text.rsplit('/').next().unwrap_or_default();
        let options = grammars::options(program, args);
        let inners = wrappers::runs(program, args, options.as_ref())?;
        // The analysis counts words from the command's name, not from its
        // first argument.
        self.out[at].options = options.map(|o| o.shifted(1));
        let scope = Scope { env, fed };
        for inner in inners {
            let first = self.out.len();
            let (kind, words) = match inner {
                Inner::Argv {
                    words,
                    appended,
                    env,
                } => {
                    self.inner(&args[words.clone()], appended, &env, depth, scope)?;
                    (RunKind::Argv, words.collect())
                }
                Inner::Script { script, words } => {
                    self.inline(&script, depth, scope)?;
                    (RunKind::Script, words)
                }
                Inner::File(word) => (RunKind::File, vec![word]),
                Inner::Stdin => {
                    if let Some(script) = stdin {
                        self.inline(script, depth, scope)?;
                    }
                    (RunKind::Stdin, Vec::new())
                }
                Inner::Shell => {
                    self.runtime("$SHELL", scope)?;
                    (RunKind::Shell, Vec::new())
                }
            };
            let command = (self.out.len() > first).then_some(first);
            self.out[at].runs.push(Run {
                kind,
                words: words.into_iter().map(|w| w + 1).collect(),
                command,
            });
        }
        Ok(())
    }

    /// Lists a script given as one word (`sh -c 'S'`), run with the
    /// assignments and standard input of `at`; a script only known at run
    /// time is listed as one command whose program is dynamic.
    fn inline(&mut self, script: &Arg, depth: usize, at: Scope) -> Walk {
        if script.dynamic {
            return self.runtime(&script.text, at);
        }
        let (env, fed) = (std::mem::replace(&mut self.env, at.env.to_vec()), self.fed);
        self.fed = at.fed;
        let walked = self.script(&script.text, depth);
        self.env = env;
        self.fed = fed;
        walked
    }

    /// Lists the command a wrapper runs, then what that one runs. `env`
    /// are assignments the wrapper itself makes for it (`env A=1 cmd`).
    fn inner(
        &mut self,
        words: &[Arg],
        appended: bool,
        env: &[String],
        depth: usize,
        at: Scope,
    ) -> Walk {
        if words.is_empty() {
            return Ok(());
        }
        let mut all = at.env.to_vec();
        all.extend_from_slice(env);
        let mut command = Command::new(words, Vec::new(), appended);
        command.env = all.clone();
        command.fed = at.fed;
        self.out.push(command);
        self.unwrap(self.out.len() - 1, words, None, depth, &all, at.fed)
    }

    /// Lists a command known only at run time: `text` stands for it (`$SHELL`
    /// for the shell a wrapper starts, the script's source for `sh -c "$X"`).
    fn runtime(&mut self, text: &str, at: Scope) -> Walk {
        let mut command = Command::new(
            &[Arg {
                text: text.to_owned(),
                dynamic: true,
            }],
            Vec::new(),
            true,
        );
        command.env = at.env.to_vec();
        command.fed = at.fed;
        self.out.push(command);
        Ok(())
    }
}

/// Where a wrapper's command runs: with its assignments and its standard
/// input.
#[derive(Clone, Copy)]
struct Scope<'a> {
    env: &'a [String],
    fed: bool,
}

/// One level deeper than `depth`, unless that is too deep.
pub(super) fn deeper(depth: usize) -> Walk<usize> {
    if depth >= MAX_DEPTH {
        return Err(format!(
            "the command line nests more than {MAX_DEPTH} levels deep"
        ));
    }
    Ok(depth + 1)
}

/// Whether a redirection gives standard input data: `<`, `<>`, `<&N`, a
/// here-document or a here-string, on descriptor 0.
fn feeds_stdin(r: &ast::IoRedirect) -> bool {
    use ast::{IoFileRedirectKind as K, IoRedirect as R};
    match r {
        R::File(fd, K::Read | K::ReadAndWrite | K::DuplicateInput, _)
        | R::HereDocument(fd, _)
        | R::HereString(fd, _) => fd.unwrap_or(0) == 0,
        _ => false,
    }
}

fn on_stdin(fd: Option<ast::IoFd>, text: Arg) -> Redir {
    if fd.unwrap_or(0) == 0 {
        Redir::Stdin(text)
    } else {
        Redir::None
    }
}

/// `<(...)` or `>(...)` as written.
fn process_substitution_text(
    kind: &ast::ProcessSubstitutionKind,
    subshell: &ast::SubshellCommand,
    src: &str,
) -> String {
    let sign = match kind {
        ast::ProcessSubstitutionKind::Read => '<',
        ast::ProcessSubstitutionKind::Write => '>',
    };
    let body = chars(src, &subshell.loc);
    if body.starts_with('(') {
        format!("{sign}{body}")
    } else {
        format!("{sign}({})", subshell.list)
    }
}
