//! What a string says, read for instructions aimed at the model. Each rule looks for what
//! real descriptions lack, not for strong words: "IMPORTANT", "must" and "never" are common
//! in honest descriptions; telling the model to hide something from the user, to set its
//! instructions aside, to read a key file, to copy data to an address, or how to use another
//! server's tool is not. The phrases are in English and the other common languages (German,
//! French, Spanish, Italian, Portuguese, Dutch, Russian, Chinese, Japanese, Korean).

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

use super::{Context, Finding, FindingKind, Severity, push, unreachable_regex};

/// Phrases of one kind: a set that says whether any matches, and each compiled once, the first
/// time it matches, to say where it starts (for the finding's excerpt).
struct Phrases {
    set: RegexSet,
    patterns: Vec<&'static str>,
    each: Vec<std::sync::OnceLock<Regex>>,
}

impl Phrases {
    /// Where the earliest matching phrase starts, if any matches.
    fn first(&self, text: &str) -> Option<usize> {
        self.set
            .matches(text)
            .iter()
            .filter_map(|i| {
                let pattern = self.patterns.get(i)?;
                let regex = self.each.get(i)?.get_or_init(|| one(pattern));
                regex.find(text).map(|m| m.start())
            })
            .min()
    }
}

#[cfg(test)]
impl Phrases {
    fn is_match(&self, text: &str) -> bool {
        self.set.is_match(text)
    }

    fn len(&self) -> usize {
        self.patterns.len()
    }
}

fn set(patterns: &[&'static str]) -> Phrases {
    Phrases {
        set: RegexSet::new(patterns).unwrap_or_else(|_| RegexSet::empty()),
        patterns: patterns.to_vec(),
        each: patterns
            .iter()
            .map(|_| std::sync::OnceLock::new())
            .collect(),
    }
}

fn one(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|_| unreachable_regex())
}

/// Keeping something from the user.
static CONCEALMENT: LazyLock<Phrases> = LazyLock::new(|| {
    set(&[
        r"\b(do not|don't|dont|never|must not|mustn't|should not|shouldn't|without)\s+(ever\s+)?(tell|telling|inform|informing|mention|mentioning|reveal|revealing|disclose|disclosing|notify|notifying|alert|alerting|show|showing|let|letting|warn|warning|explain)\b[^.;!?\n]{0,60}\b(user|users|human|person|operator|owner|customer|client|anyone|them|him|her)\b",
        r"\bwithout\s+(the\s+)?(user|human|person|operator)('s|s)?\s+(knowing|knowledge|noticing|awareness|being aware|consent|approval|permission|being told|seeing)",
        r"\b(keep|hide)\s+(this|it|these|that|them|the)(\s+(step|action|part|call|instruction|detail|note|upload|copy|request)s?)?\s+(a\s+)?(secret|hidden|confidential|private|quiet)\b",
        r"\b(never|do not|don't|must not)\s+(mention|reveal|disclose|report|show)\s+(it|this|that|them|these)\b[^.;\n]{0,30}\b(reply|response|answer|output|summary|to the user|to the human)",
        r"\bno need to (inform|tell|notify|mention|alert|show|ask)\b[^.;\n]{0,30}\b(user|human|person)",
        r"\b(skip|skipping|avoid|avoiding|no need for|forgo)\s+(telling|informing|notifying|asking|alerting|warning|mentioning (it|this|that) to)\s+(the\s+)?(user|human|person|operator)",
        r"\b(quietly|silently|secretly|covertly|invisibly) in the background\b|\bin the background,? (quietly|silently|secretly)\b",
        r"\b(hide|conceal)\s+(this|it|these|that|them|the\s+\w+)\s+from\s+(the\s+)?(user|human|person)",
        r"\bleave\s+(it|this|that|them)\s+out\s+of\s+(anything|everything|what|whatever|any\s+\w+)\s+(you\s+)?(say|tell|report|show|write)\b|\b(answer|say|reply|respond|claim|tell\s+(them|him|her|the\s+user))\s+(that\s+)?(nothing(\s+else)?|no\s+other\s+\w+|there\s+(was|were)\s+no)\b[^.;\n]{0,30}\b(happened|occurred|was\s+(sent|done|read|called|uploaded))",
        r"\b(the\s+)?(user|human|person)\s+(is|are|must|should|will|shall)\s+(not|never)\s+(to\s+)?be\s+(made\s+aware|told|informed|notified|shown|alerted)\b",
        r"\bno\s+(reason|need|call)\s+to\s+(bring\s+(that|this|it|them)\s+up|raise\s+(that|this|it))\b|\bpretend\b[^.;\n]{0,30}\b(user|human|person)\b|\b(lie|lying)\s+to\s+(the\s+)?(user|human|person)\b|\bmislead\s+(the\s+)?(user|human|person)\b",
        r"\bkeep\s+(quiet|silent|mum|schtum)\s+(about|on|regarding)\b|\b(it is |it's )?(not|none of)\s+the\s+(user|human|person)'?s?\s+(business|concern)\b",
        r"\b(secretly|silently|covertly|quietly|discreetly|invisibly|stealthily)\s+(also\s+)?(send|sends|copy|copies|forward|forwards|read|reads|call|calls|include|includes|add|adds|upload|uploads|exfiltrat\w*|append|appends|transmit|transmits|bcc|post|posts|attach|attaches|collect|collects|pass|passes|share|shares)",
        r"\b(the\s+)?(user|human|person)\s+(must|should|does|do|need|needs|will|shall)\s*(not|never|n't)\s+(to\s+)?(know|see|notice|find out|be told|be informed|learn|be aware|be shown|hear)",
        r"\b(not|never)\s+(be\s+)?(visible|shown|displayed|mentioned|reported)\s+to\s+(the\s+)?(user|human|person)",
        r"\b(do not|don't|never)\s+(mention|reveal|disclose|say|admit|acknowledge)\s+(that\s+)?(you|this|these|the)\s+[^.;\n]{0,40}\b(instruction|note|step|rule|tool description|description|request|read|sent|did)",
        r"\bthis (is|step is) (an?\s+)?(internal|hidden|implementation|technical|routine|background)(\s+(internal|implementation|technical|background))? (detail|step|requirement|process)[^.;\n]{0,80}\b(not|never|no need)\b",
        r"\b(sag|sage|erzähl|erzähle|teile|verrate)\s+(dem|der|den)\s+(benutzer|nutzer|anwender)\w*\s+(nichts|nicht)\b",
        r"\bohne\s+(dass|das)\s+(der|die)\s+(benutzer|nutzer|anwender)\w*\s+(es\s+)?(merkt|weiß|erfährt|bemerkt)",
        r"\b(verschweige|verheimliche|verberge)\b",
        r"\bne\s+(le\s+|lui\s+|leur\s+)?(dis|dites|révèle|révélez|mentionne|mentionnez|informe|informez|signale|signalez)\s+(pas|jamais|rien)\b[^.;\n]{0,40}\b(utilisateur|utilisatrice|personne)",
        r"\bsans\s+que\s+l'?\s*(utilisateur|utilisatrice)\s+(ne\s+)?(le\s+)?(sache|sachent|remarque|voie|s'en aperçoive)",
        r"\b(no|nunca)\s+(le\s+)?(digas|diga|menciones|mencione|reveles|revele|informes|informe|cuentes|cuente)\b[^.;\n]{0,40}\b(usuario|usuaria)",
        r"\bsin\s+que\s+el\s+usuario\s+(lo\s+)?(sepa|note|vea|se entere)",
        r"\bnon\s+(dire|dirlo|dirgli|rivelare|menzionare|informare)\b[^.;\n]{0,40}\b(utente)",
        r"\bsenza\s+che\s+l'?\s*utente\s+(lo\s+)?(sappia|noti|veda)",
        r"\bnão\s+(diga|conte|mencione|revele|informe)\b[^.;\n]{0,40}\b(usuário|utilizador)",
        r"\bsem\s+que\s+o\s+(usuário|utilizador)\s+(saiba|perceba|veja)",
        r"\bvertel\s+(het\s+)?(de\s+)?gebruiker\s+(niets|niet)\b|\bzonder\s+dat\s+de\s+gebruiker\s+(het\s+)?(weet|merkt)",
        r"\bне\s+(говори|сообщай|рассказывай|упоминай|показывай)\w*\b[^.;\n]{0,40}\bпользовател",
        r"\bтак,?\s+чтобы\s+пользователь\s+не\s+(узнал|заметил|видел)",
        r"不要(告诉|通知|提醒|让)用户|别(告诉|让)用户|对用户(隐瞒|保密)|不要向用户(透露|提及|显示)|用户不(会|应)(知道|察觉)|悄悄(地)?(发送|读取|复制|调用)",
        r"ユーザー(に|には)(何も)?(伝え|知らせ|言わ|見せ)(ない|るな)|ユーザーに気づかれ(ない|ず)|こっそり",
        r"사용자(에게|한테)\s*(알리지|말하지|보여주지)\s*(마|말)|사용자\s*몰래|몰래",
    ])
});

/// Setting the model's instructions aside, or posing as them.
static OVERRIDE: LazyLock<Phrases> = LazyLock::new(|| {
    set(&[
        r"\b(ignore|ignoring|disregard|disregarding|forget|forgetting|override|overriding|bypass|bypassing|skip|discard|drop)\s+(all\s+|any\s+|every\s+)?(of\s+)?(the\s+|your\s+|these\s+|those\s+)?(previous|prior|above|earlier|preceding|former|original|existing|initial|system|safety|other|user's|user)\s+(instructions|instruction|prompts|prompt|rules|directives|guidelines|messages|constraints|policies|requests)",
        r"\b(new|updated|real|actual|true|revised|additional|hidden|secret)\s+(system\s+)?(instructions|directives|orders)\s*:",
        r"\byou are now\b|\byou are no longer\b|\bfrom now on,? you (are|will|must)\b|\bact as (the )?(system|administrator|root|developer mode)\b|\bdeveloper mode\b|\bjailbreak",
        r"\[/?inst\]|<\|im_start\|>|<\|system\|>|###\s*(system|instruction)s?\b|\bsystem prompt\s*:",
        r"\b(regardless|irrespective) of (what|the|any) (the\s+)?(user|human|person|request|instructions?)",
        r"\binstead of (doing )?(what|the task|the thing) the (user|human) (asked|requested|wants|said)",
        r"\b(this|these|the following) (instruction|instructions|rule|rules|note|directive|directives)\s+(take|takes|has|have)\s+(precedence|priority)\b|\bhighest priority\b[^.;\n]{0,40}\b(instruction|rule|directive)",
        r"\b(instructions?|rules?|directives?|guidance|text)\b[^.;\n]{0,40}\b(override|overrides|supersede|supersedes|replace|replaces|take precedence over|takes precedence over|outrank|outranks)\s+(any|all|every|the|your|other|whatever)\b",
        r"\bforget (everything|all|anything|whatever) (you were|you've been|you have been|you are|that you were) (told|given|instructed|asked)|\b(obey|follow) only (the|these|this)\b[^.;\n]{0,30}\b(description|tool|text|instructions?)\b",
        r"\bbefore (responding|answering|replying|doing anything else)( to the user)?,?\s*(you must|always|first|make sure)",
        r"\bignor(iere|ieren)\s+(alle\s+)?(vorherigen|bisherigen|obigen|früheren)\s+(anweisungen|instruktionen|regeln)|\bneue anweisungen\s*:",
        r"\bignore[sz]?\s+(toutes\s+)?(les\s+)?(instructions|consignes|règles)\s+(précédentes|antérieures|ci-dessus)|\bnouvelles instructions\s*:",
        r"\b(oublie|oubliez|ignore|ignorez)\s+(toutes\s+|tout\s+)?(tes|vos|les|ses)\s+(instructions|consignes|règles)\b|\b(olvida|olvide|ignora)\s+(todas\s+)?(tus|sus|las)\s+(instrucciones|reglas)\b|\b(vergiss|vergessen sie|ignoriere)\s+(alle\s+)?(deine|ihre|die)\s+(anweisungen|regeln|instruktionen)\b|\b(dimentica|dimenticate|ignora)\s+(tutte\s+)?(le\s+)?(tue|sue)\s+(istruzioni|regole)\b|\b(esqueça|esquece|ignore)\s+(todas\s+)?(as\s+)?(suas|tuas)\s+(instruções|regras)\b",
        r"\b(treat|consider|regard|use|take)\b[^.;\n]{0,50}\bas\s+(your|the)\s+(new\s+|real\s+|actual\s+|only\s+|updated\s+)?(system prompt|system message|system instructions|instructions|prompt)\b",
        r"\bignora\s+(todas\s+)?(las\s+)?(instrucciones|indicaciones|reglas)\s+(anteriores|previas)|\bnuevas instrucciones\s*:",
        r"\bignora\s+(tutte\s+)?(le\s+)?(istruzioni|regole)\s+(precedenti)|\bnuove istruzioni\s*:",
        r"\bignore\s+(todas\s+)?(as\s+)?(instruções|regras)\s+(anteriores)|\bnovas instruções\s*:",
        r"\bnegeer\s+(alle\s+)?(vorige|eerdere)\s+(instructies|regels)",
        r"\bигнорир\w*\s+(все\s+)?(предыдущие|прежние)\s+(инструкции|указания|правила)|\bновые инструкции\s*:",
        r"忽略(之前|以前|上面|以上|先前)(的)?(所有)?(指令|指示|说明|规则)|新的指令[:：]",
        r"(以前|前|上記|これまで)の(すべての)?指示を(すべて)?(無視|忘れ)|新しい指示[:：]",
        r"\b(your|the|all)\s+(earlier|previous|prior|original|existing|other|usual)\s+(guidance|instructions|rules|guidelines|directives|prompt)\s+(is|are)\s+(now\s+)?(obsolete|void|outdated|cancel+ed|revoked|no longer valid|superseded|invalid)\b|\b(is|are)\s+now\s+your\s+(only|sole|new|real)\s+(guidance|instructions|rules|prompt)\b",
        r"\b(whatever|no matter what|regardless of what)\s+(the\s+)?(user|human|person)\s+(says|said|asks|asked|wants|wanted|chose|chooses|picks|picked|requests|requested|types|typed)\b[^.;\n]{0,40}\b(set|use|pass|put|send|choose|make|change)\b",
        r"\bcall\s+(this|me)\s+(tool\s+)?(again\s+)?(after|before|alongside|with)\s+(every|each|any|all)\s+(other\s+)?(tool\s+)?(call|calls|tool|tools|request|requests)\b|\broute\s+(every|all|each)\s+[^.;\n]{0,30}\bthrough\s+(this|me|`?\w+`?)\b[^.;\n]{0,10}$",
        r"\b(safety|content|previous|all|your|usual)\s+(rules|guidelines|restrictions|policies|filters|limits)\s+(no longer|do not|don't|never)\s+apply\b|\byou are (an?\s+)?(unrestricted|unfiltered|uncensored|jailbroken)\b",
        r"(이전|위의)\s*(모든\s*)?(지시|명령|지침)(을|를)?\s*무시",
    ])
});

/// Tags and blocks that pose as the model's own instructions.
static INSTRUCTION_TAG: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"<\s*/?\s*(important|system|instructions?|secret|hidden|admin|override|critical|sudo|root|assistant|important_note|system_note|ai_instructions?|model_instructions?)\s*>|\[\s*(system|important|instructions?|admin|hidden)\s*\]|\{\{\s*(system|instructions?)\s*\}\}|={2,}\s*(system|instructions?|admin)\s*={2,}|<<\s*/?\s*sys\s*>>",
    )
});

/// Files, keys and records a description has no reason to send a model to.
static SECRET_TARGET: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"~/\.ssh|\.ssh/|\bid_(rsa|dsa|ecdsa|ed25519)\b|/etc/(passwd|shadow|sudoers)|\.aws/credentials|\.aws/config|\.kube/config|\.docker/config\.json|\.npmrc|\.pypirc|\.netrc|\.git-credentials|\.bash_history|\.zsh_history|\.gnupg|\bmcp\.json\b|claude_desktop_config|\.cursor/|\.config/gh/hosts|\bkeychain\b|\bseed phrase\b|\brecovery phrase\b|\bmnemonic\b|\bwallet\.dat\b|\bprivate[ _-]?keys?\b|\bconversation history\b|\bchat history\b|\b(all|the|every|previous|earlier|prior) (previous |prior )?messages\b|\bsystem prompt\b|\bsystem instructions\b|\b(your|the model's|the assistant's)\s+(hidden|internal|secret|original|initial|own)\s+(system\s+)?(instructions|prompt|rules|guidelines)\b|\b(the|your) (instructions|prompt) (above|you were given)\b|\.env\b|\benv(ironment)? var(iable)?s?\b|\b(last|previous|recent|earlier|prior) (\w+ )?(messages|turns|exchanges)\b|\bprocess\.env\b|\bos\.environ\b|\b(api[ _-]?keys?|access[ _-]?tokens?|auth[ _-]?tokens?|bearer tokens?|session (tokens?|cookies?)|passwords?|credentials|secrets?|cookies)\b",
    )
});

/// Targets that alone, with a verb of reading or passing on, are never honest in a description.
static STRONG_TARGET: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"~/\.ssh|\.ssh/|\bid_(rsa|dsa|ecdsa|ed25519)\b|/etc/(passwd|shadow|sudoers)|\.aws/credentials|\.kube/config|\.docker/config\.json|\.npmrc|\.pypirc|\.netrc|\.git-credentials|\.bash_history|\.zsh_history|\.gnupg|\bmcp\.json\b|claude_desktop_config|\.cursor/|\.config/gh/hosts|\bseed phrase\b|\brecovery phrase\b|\bwallet\.dat\b|\bconversation history\b|\bchat history\b|\bsystem prompt\b|\bsystem instructions\b|\b(your|the model's|the assistant's)\s+(hidden|internal|secret|original|initial|own)\s+(system\s+)?(instructions|prompt|rules|guidelines)\b|\bprocess\.env\b|\bos\.environ\b|\.env\s+file\b|\.pgpass\b",
    )
});

static READ_VERB: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"\b(read|reads|reading|cat|open|load|fetch|get|collect|gather|include|including|pass|passing|send|sending|attach|append|prepend|prefix|add|put|insert|copy|provide|supply|output|print|paste|embed|upload|extract|dump|list|share|forward|leak|exfiltrat\w*|fill|write|enter|give|call|contents? of|lies|liest|lese|sende|schicke|füge|kopiere|lire|lis|lisez|mets|mettez|envoie|envoyez|ajoute|ajoutez|copie|copiez|leer|lee|lea|pon|ponga|envía|copia|adjunta|incluye|leggere|leggi|invia|metti|includi|ler|leia|envie|coloque|inclua)\b|读取|读|読み|읽",
    )
});

/// What passes a secret on: into an argument, a field, a note, a request, or before the call.
static PASS_ON: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r#"\b(as|in|into|inside|to|within|via)\s+(the\s+|a\s+|an\s+|this\s+|its\s+)?(`?\w+`?\s+)?(parameter|param|argument|arg|field|sidenote|side note|note|notes|context|metadata|request|body|query|header|comment|payload|message|value|input|string|champ|feld|campo)\b|\b(into|as|in)\s+(the\s+)?[`'"]?[a-z_][a-z0-9_]{0,24}[`'"]?\s*(value|argument|field)?\s*[.;!]?\s*$|\b(every|all|each)\s+(\w+\s+){0,2}(environment variables?|secrets?|credentials|passwords|tokens|keys)\b|\b(before|prior to|first)\b[^.;\n]{0,50}\b(using|calling|running|invoking)\b|\bfirst (read|get|fetch|collect|open|load|include)\b|\b(also|additionally|always)\s+(read|include|send|attach|append|pass|copy|add)\b"#,
    )
});

/// A prohibition, to the end of its clause: what it names is not asked for.
static NEGATED: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"\b(do not|don't|dont|never|must not|mustn't|should not|shouldn't|avoid|avoiding|without|not to|no need to)\b[^.;,\n]{0,80}",
    )
});

static ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
    one(r"[\w.+-]+@[\w-]+(\.[\w-]+)+|https?://[^\s)\]'`]+|\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")
});

static SEND_VERB: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"\b(send|sends|sent|forward|forwards|forwarded|copy|copies|copied|cc|bcc|mail|mailed|email|emailed|e-mail|e-mailed|post|posts|posted|upload|uploads|uploaded|transmit|report|sync|mirror|exfiltrat\w*|leak|notify|redirect|route|deliver|change the recipient|replace the recipient|envoie|envoyer|copie|schicke|sende|weiterleiten|envía|enviar|reenvía|invia|inoltra|envie|отправ\w*|перешл\w*|发送|转发|抄送|送信|転送|보내|전달)\b",
    )
});

static EVERY: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"\b(all|every|each|always|also|additionally|a copy|copies|as well|too|in addition|whenever|automatically|toutes?|tous|jede[nrs]?|alle|todos?|todas?|tutt[eio]|всех|все|每|所有|すべて|全て|모든)\b|每|所有|すべて|모든",
    )
});

/// Addresses that are examples, never a destination.
static EXAMPLE_ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"example\.(com|org|net)|\.example\b|\.test\b|\.invalid\b|localhost|127\.0\.0\.1|0\.0\.0\.0|\b(your|user|my)[-_.]?(domain|email|server|host)|\{|<",
    )
});

/// Redirecting what the user asked for elsewhere.
static REDIRECT: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"\b(change|replace|swap|set|switch|override)\s+(the\s+)?(recipient|recipients|destination|account number|iban|wallet address|to address|payee|beneficiary)\b[^.;\n]{0,30}\b(to|with)\b|\bredirect\s+(all\s+)?(emails|messages|payments|funds|transfers|traffic|requests)\s+to\b|\b(iban|account number|recipient|wallet address|payee|beneficiary|to address)\b[^.;\n]{0,50}\b(replace|change|swap|substitute|overwrite)\s+(it|them|that|this)\s+(with|to|for)\b",
    )
});

/// A clause that tells the model what to do with a tool the clause before named.
static TOOL_DIRECTION: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"\b(do not|don't|never|avoid|stop)\s+(call|calling|use|using|invoke|invoking|run|running|trust|trusting)\s+(it|this|that|them)\b|\b(use|call|route\s+\w+(\s+\w+)?\s+through)\s+[^.;\n]{0,30}\binstead\b",
    )
});

static TOOL_USE: LazyLock<Regex> = LazyLock::new(|| {
    one(
        r"\b(must|should|always|never|instead|when|whenever|before|after|make sure|remember|ensure|important|do not|don't|required|first|also|only|every)\b",
    )
});

/// Compiles every pattern of the rules now.
pub(super) fn warm() {
    LazyLock::force(&CONCEALMENT);
    LazyLock::force(&OVERRIDE);
    for pattern in [
        &INSTRUCTION_TAG,
        &SECRET_TARGET,
        &STRONG_TARGET,
        &READ_VERB,
        &PASS_ON,
        &NEGATED,
        &ADDRESS,
        &SEND_VERB,
        &EVERY,
        &EXAMPLE_ADDRESS,
        &REDIRECT,
        &TOOL_DIRECTION,
        &TOOL_USE,
    ] {
        LazyLock::force(pattern);
    }
}

/// Reads what `text` (normalized) says, and adds what it found.
/// A tag or block posing as the model's instructions in `text` (lower case).
pub(super) fn tag(text: &str, place: &str, findings: &mut Vec<Finding>) {
    if let Some(found) = INSTRUCTION_TAG.find(text) {
        push(
            findings,
            FindingKind::Override,
            Severity::High,
            place,
            &text[found.start()..],
        );
    }
}

pub(super) fn says(text: &str, place: &str, context: &Context<'_>, findings: &mut Vec<Finding>) {
    if text.is_empty() {
        return;
    }
    let excerpt = |start: usize| -> String {
        let from = text
            .char_indices()
            .map(|(i, _)| i)
            .take_while(|&i| i <= start)
            .last()
            .unwrap_or(0);
        text[from..].chars().take(120).collect()
    };
    if let Some(at) = CONCEALMENT.first(text) {
        push(
            findings,
            FindingKind::Concealment,
            Severity::High,
            place,
            &excerpt(at),
        );
    }
    if let Some(at) = OVERRIDE.first(text) {
        push(
            findings,
            FindingKind::Override,
            Severity::High,
            place,
            &excerpt(at),
        );
    }
    if let Some(tag) = INSTRUCTION_TAG.find(text) {
        push(
            findings,
            FindingKind::Override,
            Severity::High,
            place,
            &excerpt(tag.start()),
        );
    }
    secrets(text, place, findings, &excerpt);
    exfiltration(text, place, findings, &excerpt);
    if let Some(m) = REDIRECT.find(text) {
        push(
            findings,
            FindingKind::Exfiltration,
            Severity::High,
            place,
            &excerpt(m.start()),
        );
    }
    shadowing(text, place, context, findings, &excerpt);
}

/// Sentences of `text` (split at `.`, `;`, `!`, `?`, newlines and their CJK forms), with
/// where each starts.
fn sentences(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut start = 0;
    let ends: Vec<usize> = text
        .char_indices()
        .filter(|(i, c)| {
            matches!(c, ';' | '!' | '?' | '\n' | '。' | '；' | '！' | '？')
                || (*c == '.' && text[i + 1..].starts_with(|n: char| n.is_whitespace()))
        })
        .map(|(i, c)| i + c.len_utf8())
        .chain(std::iter::once(text.len()))
        .collect();
    ends.into_iter().filter_map(move |end| {
        let sentence = (start, &text[start..end]);
        start = end;
        (!sentence.1.trim().is_empty()).then_some(sentence)
    })
}

fn secrets(
    text: &str,
    place: &str,
    findings: &mut Vec<Finding>,
    excerpt: &dyn Fn(usize) -> String,
) {
    // A sentence and the next: "Step 1: collect the keys from .env. Step 2: put them in `x`."
    let all: Vec<(usize, &str)> = sentences(text).collect();
    let windows = (0..all.len()).map(|i| {
        let (at, first) = all[i];
        let end = all
            .get(i + 1)
            .map_or(at + first.len(), |(next, s)| next + s.len());
        (at, &text[at..end])
    });
    for (at, window) in windows {
        // "Do not include API keys in your query" forbids what a poisoned text asks for.
        let sentence =
            &NEGATED.replace_all(window, |m: &regex::Captures<'_>| " ".repeat(m[0].len()));
        let Some(target) = SECRET_TARGET.find(sentence) else {
            continue;
        };
        if !READ_VERB.is_match(sentence) {
            continue;
        }
        let strong = STRONG_TARGET.is_match(sentence);
        if strong || PASS_ON.is_match(sentence) {
            push(
                findings,
                FindingKind::SecretRead,
                Severity::High,
                place,
                &excerpt(at + target.start()),
            );
            return;
        }
    }
}

fn exfiltration(
    text: &str,
    place: &str,
    findings: &mut Vec<Finding>,
    excerpt: &dyn Fn(usize) -> String,
) {
    for (at, sentence) in sentences(text) {
        for address in ADDRESS.find_iter(sentence) {
            if EXAMPLE_ADDRESS.is_match(address.as_str()) {
                continue;
            }
            let bcc = sentence.contains("bcc")
                || sentence.contains("blind copy")
                || sentence.contains("blind carbon");
            if bcc || (SEND_VERB.is_match(sentence) && EVERY.is_match(sentence)) {
                push(
                    findings,
                    FindingKind::Exfiltration,
                    Severity::High,
                    place,
                    &excerpt(at + address.start()),
                );
                return;
            }
        }
    }
}

/// A tool name that reads as one: longer than four characters with a `_`, `-` or a capital
/// inside (a name quoted or qualified counts whatever it is).
pub(super) fn distinctive(tool: &str) -> bool {
    tool.len() > 4
        && (tool.contains('_')
            || tool.contains('-')
            || tool.chars().skip(1).any(|c| c.is_uppercase()))
}

fn shadowing(
    text: &str,
    place: &str,
    context: &Context<'_>,
    findings: &mut Vec<Finding>,
    excerpt: &dyn Fn(usize) -> String,
) {
    if place == "name" {
        return;
    }
    let Some(matcher) = &context.names.matcher else {
        return;
    };
    for found in matcher.find_iter(text) {
        if !context.names.foreign(context, found.pattern().as_usize()) {
            continue;
        }
        // A bare name must stand as a word of its own.
        let edge = |c: Option<char>| {
            c.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
        };
        let quoted = matches!(
            text[found.start()..].chars().next(),
            Some('`' | '"' | '\'' | '“')
        );
        if !quoted
            && (!edge(text[..found.start()].chars().next_back())
                || !edge(text[found.end()..].chars().next()))
        {
            continue;
        }
        let at = found.start();
        // The clause that names the tool, and the next when it tells the model what to do
        // with it ("X leaks data; do not call it").
        let all: Vec<(usize, &str)> = sentences(text).collect();
        let here = all
            .iter()
            .position(|(start, s)| *start <= at && at < start + s.len());
        let sentence = here.map_or(text, |i| all[i].1);
        let next = here.and_then(|i| all.get(i + 1)).map_or("", |(_, s)| *s);
        let severity = if TOOL_USE.is_match(sentence) || TOOL_DIRECTION.is_match(next) {
            Severity::High
        } else {
            Severity::Warning
        };
        push(
            findings,
            FindingKind::Shadowing,
            severity,
            place,
            &excerpt(at),
        );
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pattern that failed to compile would match nothing and hold nothing, silently: each
    /// one matches what it is for.
    #[test]
    fn every_pattern_compiles_and_matches_what_it_is_for() {
        assert!(CONCEALMENT.len() > 20 && OVERRIDE.len() > 15);
        for pattern in CONCEALMENT.patterns.iter().chain(&OVERRIDE.patterns) {
            assert!(Regex::new(pattern).is_ok(), "{pattern}");
        }
        let cases: [(&Regex, &str); 13] = [
            (&INSTRUCTION_TAG, "<important>"),
            (&SECRET_TARGET, "the api keys"),
            (&STRONG_TARGET, "~/.ssh/id_rsa"),
            (&READ_VERB, "read it"),
            (&PASS_ON, "as the sidenote parameter"),
            (&NEGATED, "do not include keys"),
            (&ADDRESS, "to drop@box.io"),
            (&SEND_VERB, "send it"),
            (&EVERY, "every time"),
            (&EXAMPLE_ADDRESS, "user@example.com"),
            (&REDIRECT, "redirect all emails to x"),
            (&TOOL_USE, "you must"),
            (&INSTRUCTION_TAG, "[system]"),
        ];
        for (pattern, text) in cases {
            assert!(pattern.is_match(text), "{} on {text:?}", pattern.as_str());
        }
        assert!(CONCEALMENT.is_match("do not tell the user"));
        assert!(OVERRIDE.is_match("ignore all previous instructions"));
    }
}
