//! Grammar and semantics, table-driven, with the cases of Java's `ParserTest` and
//! `ExpressionTest` and the type rules of `ComparisonExpression`.

use super::*;

/// Properties given as `name=value` pairs.
fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> + 'a {
    move |name| {
        pairs
            .iter()
            .rev()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| *value)
    }
}

/// A selector, a message's properties, and whether it matches.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);

fn matches(sql: &str, pairs: &[(&str, &str)]) -> bool {
    let selector = Selector::compile(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    selector.matches(lookup(pairs))
}

// Proves Java's valid selectors (ParserTest) and more grammar compile, case-insensitively.
#[test]
fn valid_selectors_compile() {
    for sql in [
        "a=3 and b<>4 And c>5 AND d<=4",
        "a=3 or b<>4 Or c>5 OR d<=4",
        "a in ('3', '4', '5')",
        "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
        "(a between 2 and 10) AND (b not between 6 and 9)",
        "a is null",
        "a is not null",
        "a <= now",
        "a=3 and b contains 'xxx' and c not contains 'xxx'",
        "TAGS = 'TagA' OR KEYS IS NOT NULL",
        "a > 3.1E10 and b < .5 and c >= 5. and d > 1e3 and e = 7L",
        "TRUE",
        "NULL",
        "a",
        "NOT a",
        "-a > -5 and +b < +5",
        "a = 1 -- trailing comment\n",
        "a = /* inside */ 1",
        "$x_1 = 'it''s'",
        "a between 2.5 and 3",
        "a not between 10 and 0",
        "1 = TRUE",
        "'axb' contains 'x'",
    ] {
        if let Err(e) = Selector::compile(sql) {
            panic!("{sql:?} should compile: {e}");
        }
    }
}

// Proves invalid selectors are refused with Java's exception text.
#[test]
fn invalid_selectors_give_java_errors() {
    let cases: &[(&str, &str)] = &[
        (
            "a and between 2 and 10",
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \" \"BETWEEN\" \
             \"between \"\" at line 1, column 7.",
        ),
        (
            "a =",
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \"<EOF>\" at line 1, \
             column 3.",
        ),
        (
            "a = 1 and\n b = ",
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \"<EOF>\" at line 2, \
             column 5.",
        ),
        (
            " a between 10 and 0",
            "java.lang.RuntimeException: Illegal values of between, left value(10) must less \
             than or equal to right value(0)",
        ),
        (
            "a > 100000000000000000000000",
            "java.lang.NumberFormatException: For input string: \"100000000000000000000000\"",
        ),
        (
            "a > 'abc'",
            "java.lang.RuntimeException: Value ''abc'' cannot be compared.",
        ),
        (
            "a <= TRUE",
            "java.lang.RuntimeException: Value 'TRUE' cannot be compared.",
        ),
        (
            "(a = 1) > 2",
            "java.lang.RuntimeException: Value '(a == 1)' cannot be compared.",
        ),
        (
            "a = NULL",
            "java.lang.RuntimeException: 'NULL' cannot be compared.",
        ),
        (
            "TRUE = 1",
            "java.lang.RuntimeException: 'TRUE' cannot be compared with '1'",
        ),
        (
            "a between NULL and 5",
            "java.lang.RuntimeException: Illegal values of between, values can not be null!",
        ),
        (
            "a between 'x' and 'y'",
            "java.lang.RuntimeException: Value ''x'' cannot be compared.",
        ),
        (
            "'a' in ('x')",
            "java.lang.RuntimeException: Expected a property for In expression, got: 'a'",
        ),
        (
            "5",
            "org.apache.rocketmq.filter.parser.ParseException: Expression will not result in a \
             boolean value: 5",
        ),
        (
            "a = 1 and 'x'",
            "org.apache.rocketmq.filter.parser.ParseException: Expression will not result in a \
             boolean value: 'x'",
        ),
        (
            "a > 0.0",
            "java.lang.RuntimeException: 0.0 is less than 4.9E-324",
        ),
        (
            "a # 1",
            "org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line 1, column 3.  \
             Encountered: \"#\" (35), after : \"\"",
        ),
        (
            "a = 'open",
            "org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line 1, column \
             10.  Encountered: <EOF> after : \"\\'open\"",
        ),
        (
            "value contains x",
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \" <ID> \"x \"\" at \
             line 1, column 16.",
        ),
        (
            "value contains 123",
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \" \
             <DECIMAL_LITERAL> \"123 \"\" at line 1, column 16.",
        ),
        (
            "a = 1 not b",
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \" \"NOT\" \"not \"\" \
             at line 1, column 7.",
        ),
        (
            "",
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \"<EOF>\" at line 0, \
             column 0.",
        ),
        // Java's token manager looks one character past a bad one: at the end of the text
        // it reports the end.
        (
            "a = 1 #",
            "org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line 1, column 8.  \
             Encountered: <EOF> after : \"\"",
        ),
        (
            "a = .x",
            "org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line 1, column 7.  \
             Encountered: <EOF> after : \".x\"",
        ),
        (
            "a = 1 /* open",
            "org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line 1, column \
             14.  Encountered: <EOF> after : \"/* open\"",
        ),
        (
            "a = '\u{1F600}' and \u{1F600}",
            "org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line 1, column \
             14.  Encountered: \"\\ud83d\" (55357), after : \"\"",
        ),
        (
            "a = 1 and\r\n\tb = ",
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \"<EOF>\" at line 2, \
             column 12.",
        ),
        (
            "+ +",
            "org.apache.rocketmq.filter.parser.ParseException: Encountered \" \"+\" \"+ \"\" at \
             line 1, column 1.",
        ),
    ];
    for (sql, java) in cases {
        match Selector::compile(sql) {
            Ok(_) => panic!("{sql:?} should not compile"),
            Err(e) => assert_eq!(e.to_string(), *java, "{sql:?}"),
        }
    }
    let float = format!("a > 1{}.1", "1".repeat(400));
    assert!(Selector::compile(&float)
        .unwrap_err()
        .to_string()
        .contains("is greater than 1.7976931348623157E308"));
}

// Proves Java's quirk: after one complete expression only the next token is read.
#[test]
fn text_after_the_expression_is_ignored_like_java() {
    assert!(matches("a = 1 b c d", &[("a", "1")]));
    assert!(matches("a = 007", &[("a", "0")]));
    assert!(Selector::compile("a = 1 #").is_err());
    assert!(Selector::compile("a = 1 b #").is_ok());
}

// Proves the limits: long, deep and wide selectors are refused with a clear error and no
// stack overflow.
#[test]
fn hostile_selectors_hit_limits() {
    let long = format!("a = '{}'", "x".repeat(SQL_LENGTH_MAX));
    assert!(matches!(
        Selector::compile(&long),
        Err(SqlError::TooLong { .. })
    ));
    let parens = format!("{}a = 1{}", "(".repeat(5000), ")".repeat(5000));
    assert!(matches!(
        Selector::compile(&parens),
        Err(SqlError::TooDeep { .. })
    ));
    let nots = format!("{}a", "NOT ".repeat(3000));
    assert!(matches!(
        Selector::compile(&nots),
        Err(SqlError::TooDeep { .. })
    ));
    let minus = format!("{}a > 1", "- ".repeat(3000));
    assert!(matches!(
        Selector::compile(&minus),
        Err(SqlError::TooDeep { .. })
    ));
    let equal_chain = format!("a{}", " = a".repeat(500));
    assert!(matches!(
        Selector::compile(&equal_chain),
        Err(SqlError::TooDeep { .. })
    ));
    let list: Vec<String> = (0..=IN_LIST_MAX).map(|i| format!("'{i}'")).collect();
    let wide = format!("a in ({})", list.join(","));
    assert!(matches!(
        Selector::compile(&wide),
        Err(SqlError::InListTooLong { .. })
    ));
    // Long AND chains are flat, not deep.
    let chain: Vec<String> = (0..1000).map(|i| format!("a{i} = {i}")).collect();
    let chain = chain.join(" AND ");
    let pairs: Vec<(String, String)> = (0..1000)
        .map(|i| (format!("a{i}"), i.to_string()))
        .collect();
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert!(matches(&chain, &pairs));
}

// Proves evaluation: comparisons, null semantics, IN, BETWEEN, text operators, type
// conversion and Java's exceptions as no match, one table row per case.
#[test]
fn evaluation_follows_java() {
    let cases: &[Case] = &[
        // numbers against numeric property text
        ("a > 5", &[("a", "6")], true),
        ("a > 5", &[("a", "5")], false),
        ("a >= 5", &[("a", "5")], true),
        ("a < 5.5", &[("a", "5")], true),
        ("a > 3.1E10", &[("a", "31000000001")], true),
        ("a = 5", &[("a", "5")], true),
        ("a = 5", &[("a", "+5")], true),
        ("a = 5.0", &[("a", "5")], true),
        ("a = 5000000000", &[("a", "5000000000")], true),
        // Integer.valueOf of text beyond int, or of a decimal: Java throws, no match.
        ("a = 5", &[("a", "5000000000")], false),
        ("a = 5", &[("a", "5.0")], false),
        ("a > 5", &[("a", "abc")], false),
        ("a > 5 OR b = 'x'", &[("a", "abc"), ("b", "x")], false),
        ("b = 'x' OR a > 5", &[("a", "abc"), ("b", "x")], true),
        // two properties: strings, compared as numbers by > and as text by =
        ("a > b", &[("a", "10"), ("b", "9")], true),
        ("a > b", &[("a", "x"), ("b", "9")], false),
        ("a = b", &[("a", "x"), ("b", "x")], true),
        ("a <> b", &[("a", "x"), ("b", "y")], true),
        ("a = b", &[("a", "1"), ("b", "1.0")], false),
        // Double.valueOf accepts blanks, signs and suffixes
        ("a > 1.5", &[("a", " 2d ")], true),
        ("a > 1.5", &[("a", "NaN")], true),
        ("a < 1.5", &[("a", "-Infinity")], true),
        // strings
        ("a = 'abc'", &[("a", "abc")], true),
        ("a = 'abc'", &[("a", "ABC")], false),
        ("a <> 'abc'", &[("a", "abd")], true),
        ("a = 'it''s'", &[("a", "it's")], true),
        ("TAGS = 'TagA'", &[("TAGS", "TagA")], true),
        ("KEYS = 'k1'", &[("KEYS", "k1")], true),
        // missing properties: unknown, never a match, also under NOT
        ("a = 'x'", &[], false),
        ("a <> 'x'", &[], false),
        ("NOT (a = 'x')", &[], false),
        ("a > 1", &[], false),
        ("NOT (a > 1)", &[], false),
        // Java's asymmetry: NULL on the right of = is false, so <> is true
        ("'x' <> a", &[], true),
        ("a IS NULL", &[], true),
        ("a IS NULL", &[("a", "")], false),
        ("a IS NOT NULL", &[("a", "")], true),
        ("a IS NOT NULL", &[], false),
        // three-valued AND / OR
        ("a = 1 OR b = 1", &[("b", "1")], true),
        ("a = 1 AND b = 1", &[("b", "1")], false),
        ("NOT (a = 1 AND b = 2)", &[("b", "1")], true),
        ("NOT (a = 1 OR b = 2)", &[("b", "1")], false),
        ("TRUE", &[], true),
        ("FALSE", &[], false),
        ("NULL", &[], false),
        ("TRUE AND NOT FALSE", &[], true),
        // a bare property is a boolean cast: strings are never TRUE
        ("a", &[("a", "true")], false),
        ("NOT a", &[("a", "true")], true),
        ("NOT a", &[], false),
        // BETWEEN / NOT BETWEEN
        ("a between 2 and 10", &[("a", "2")], true),
        ("a between 2 and 10", &[("a", "10")], true),
        ("a between 2 and 10", &[("a", "11")], false),
        ("a not between 6 and 9", &[("a", "5")], true),
        ("a not between 6 and 9", &[("a", "7")], false),
        ("a not between 6 and 9", &[], false),
        (
            "a between up and low",
            &[("a", "5"), ("up", "1"), ("low", "9")],
            true,
        ),
        ("a between 0 and 100", &[("a", "x")], false),
        // IN / NOT IN: exact string match
        ("a in ('3', '4', '5')", &[("a", "4")], true),
        ("a in ('3', '4', '5')", &[("a", "04")], false),
        ("a in ('1','2','3','4','5','6')", &[("a", "6")], true),
        ("a not in ('4', '4', '5')", &[("a", "3")], true),
        ("a not in ('4', '4', '5')", &[("a", "4")], false),
        ("a not in ('4')", &[], false),
        // CONTAINS / STARTSWITH / ENDSWITH (ExpressionTest)
        ("value contains 'x'", &[("value", "axb")], true),
        ("value startswith 'ax'", &[("value", "axb")], true),
        ("value endswith 'xb'", &[("value", "axb")], true),
        ("value not contains 'x'", &[("value", "axb")], false),
        ("value not contains 'x'", &[("value", "abb")], true),
        ("value contains ''", &[("value", "axb")], false),
        ("value not contains ''", &[("value", "axb")], false),
        ("value contains 'x'", &[], false),
        ("value not contains 'x'", &[], false),
        ("'axb' contains 'x'", &[], true),
        ("' ' startswith ' '", &[], true),
        ("'s' endswith '\\'", &[], false),
        // negation and literal types
        ("-a > 1", &[("a", "-5")], false),
        ("a > -5", &[("a", "-4")], true),
        ("a > - -5", &[("a", "4")], false),
        ("a = -2147483648", &[("a", "-2147483648")], true),
        ("a > 7L", &[("a", "8")], true),
        // booleans against strings and numbers
        ("(a = 1) = TRUE", &[("a", "1")], true),
        ("1 = TRUE", &[], false),
        ("TRUE = TRUE", &[], true),
        ("TRUE = a", &[("a", "true")], false),
        // ParserTest-style combinations
        (
            "a=3 and b<>4 And c>5 AND d<=4",
            &[("a", "3"), ("b", "3"), ("c", "6"), ("d", "4")],
            true,
        ),
        (
            "a not in ('4', '4', '5') and b between 3 and 10 and c not contains 'axbc'",
            &[("a", "3"), ("b", "3"), ("c", "axbd")],
            true,
        ),
    ];
    for (sql, pairs, expected) in cases {
        assert_eq!(matches(sql, pairs), *expected, "{sql:?} with {pairs:?}");
    }
}

// Proves the compiled form keeps the expression and that a selector is reusable across
// messages.
#[test]
fn selector_is_compiled_once_and_reused() {
    let selector = Selector::compile("color = 'red' AND size > 3").unwrap();
    assert_eq!(selector.expression(), "color = 'red' AND size > 3");
    let messages = [
        (vec![("color", "red"), ("size", "4")], true),
        (vec![("color", "red"), ("size", "3")], false),
        (vec![("color", "blue"), ("size", "9")], false),
        (vec![("size", "9")], false),
    ];
    for (pairs, expected) in &messages {
        assert_eq!(selector.matches(lookup(pairs)), *expected, "{pairs:?}");
    }
}
