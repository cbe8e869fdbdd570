"""schema_problems and check_schema: each keyword, valid and invalid, and the message text."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from mainspring.json_schema import check_schema, schema_problems

OBJ = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"],
}

# (id, schema, value, expected problems); [] means valid.
CASES: list[tuple[str, Any, Any, list[str]]] = [
    # type
    ("type-string-ok", {"type": "string"}, "a", []),
    ("type-string-bad", {"type": "string"}, 5, ["(root): expected string, got integer (5)"]),
    ("type-integer-ok", {"type": "integer"}, 3, []),
    ("type-integer-float-whole", {"type": "integer"}, 3.0, []),
    (
        "type-integer-float",
        {"type": "integer"},
        3.5,
        ["(root): expected integer, got number (3.5)"],
    ),
    ("type-number-int", {"type": "number"}, 3, []),
    ("type-number-float", {"type": "number"}, 3.5, []),
    (
        "type-bool-not-number",
        {"type": "number"},
        True,
        ["(root): expected number, got boolean (true)"],
    ),
    (
        "type-bool-not-integer",
        {"type": "integer"},
        False,
        ["(root): expected integer, got boolean (false)"],
    ),
    ("type-boolean-ok", {"type": "boolean"}, True, []),
    ("type-boolean-bad", {"type": "boolean"}, 1, ["(root): expected boolean, got integer (1)"]),
    ("type-null-ok", {"type": "null"}, None, []),
    ("type-null-bad", {"type": "null"}, "", ['(root): expected null, got string ("")']),
    ("type-array-ok", {"type": "array"}, [1], []),
    ("type-array-bad", {"type": "array"}, {}, ["(root): expected array, got object ({})"]),
    ("type-object-ok", {"type": "object"}, {}, []),
    ("type-object-bad", {"type": "object"}, [], ["(root): expected object, got array ([])"]),
    ("type-list-ok-null", {"type": ["string", "null"]}, None, []),
    ("type-list-ok-str", {"type": ["string", "null"]}, "x", []),
    (
        "type-list-bad",
        {"type": ["string", "null"]},
        1,
        ["(root): expected string or null, got integer (1)"],
    ),
    (
        "type-list-three",
        {"type": ["string", "integer", "null"]},
        [],
        ["(root): expected string, integer or null, got array ([])"],
    ),
    (
        "type-short-circuits",
        {"type": "string", "enum": ["a"]},
        5,
        ["(root): expected string, got integer (5)"],
    ),
    # enum / const
    ("enum-ok", {"enum": ["a", "b"]}, "b", []),
    ("enum-bad", {"enum": ["a", "b"]}, "c", ['(root): expected one of "a", "b", got string ("c")']),
    ("enum-single", {"enum": ["a"]}, "c", ['(root): expected "a", got string ("c")']),
    (
        "enum-bool-is-not-int",
        {"enum": [1, 2]},
        True,
        ["(root): expected one of 1, 2, got boolean (true)"],
    ),
    ("enum-int-equals-float", {"enum": [1, 2]}, 1.0, []),
    ("enum-objects", {"enum": [{"a": [1, 2]}]}, {"a": [1, 2]}, []),
    ("const-ok", {"const": "x"}, "x", []),
    ("const-bad", {"const": "x"}, "y", ['(root): expected "x", got string ("y")']),
    ("const-null", {"const": None}, 0, ["(root): expected null, got integer (0)"]),
    ("const-false-not-zero", {"const": False}, 0, ["(root): expected false, got integer (0)"]),
    # numbers
    ("minimum-ok", {"minimum": 1}, 1, []),
    ("minimum-bad", {"minimum": 1}, 0, ["(root): must be >= 1, got 0"]),
    ("maximum-ok", {"maximum": 1}, 1, []),
    ("maximum-bad", {"maximum": 1}, 1.5, ["(root): must be <= 1, got 1.5"]),
    ("exclusive-minimum-ok", {"exclusiveMinimum": 0}, 0.1, []),
    ("exclusive-minimum-bad", {"exclusiveMinimum": 0}, 0, ["(root): must be > 0, got 0"]),
    ("exclusive-maximum-ok", {"exclusiveMaximum": 10}, 9, []),
    ("exclusive-maximum-bad", {"exclusiveMaximum": 10}, 10, ["(root): must be < 10, got 10"]),
    (
        "draft4-exclusive-minimum",
        {"minimum": 5, "exclusiveMinimum": True},
        5,
        ["(root): must be > 5, got 5"],
    ),
    ("draft4-exclusive-maximum", {"maximum": 5, "exclusiveMaximum": True}, 4, []),
    ("multiple-of-ok", {"multipleOf": 0.1}, 0.3, []),
    ("multiple-of-int-ok", {"multipleOf": 3}, 9, []),
    ("multiple-of-bad", {"multipleOf": 3}, 10, ["(root): must be a multiple of 3, got 10"]),
    ("numbers-ignore-strings", {"minimum": 5}, "abc", []),
    ("numbers-ignore-bools", {"minimum": 5}, True, []),
    # strings
    ("min-length-ok", {"minLength": 2}, "ab", []),
    (
        "min-length-bad",
        {"minLength": 2},
        "a",
        ["(root): must be at least 2 characters long, got 1"],
    ),
    ("min-length-one", {"minLength": 1}, "", ["(root): must be at least 1 character long, got 0"]),
    ("max-length-ok", {"maxLength": 2}, "ab", []),
    (
        "max-length-bad",
        {"maxLength": 2},
        "abc",
        ["(root): must be at most 2 characters long, got 3"],
    ),
    ("length-code-points", {"maxLength": 1}, "é", []),
    ("pattern-ok", {"pattern": "^[a-z]+$"}, "abc", []),
    ("pattern-unanchored", {"pattern": "b"}, "abc", []),
    (
        "pattern-bad",
        {"pattern": "^[a-z]+$"},
        "aBc",
        ['(root): must match pattern "^[a-z]+$", got "aBc"'],
    ),
    ("strings-ignore-numbers", {"minLength": 3}, 5, []),
    # arrays
    ("items-ok", {"items": {"type": "integer"}}, [1, 2], []),
    (
        "items-bad",
        {"items": {"type": "integer"}},
        [1, "x", 3, None],
        ['1: expected integer, got string ("x")', "3: expected integer, got null (null)"],
    ),
    (
        "prefix-items-ok",
        {"prefixItems": [{"type": "integer"}, {"type": "string"}]},
        [1, "a", None],
        [],
    ),
    (
        "prefix-items-bad",
        {"prefixItems": [{"type": "integer"}, {"type": "string"}]},
        ["a", "b"],
        ['0: expected integer, got string ("a")'],
    ),
    (
        "prefix-items-then-items",
        {"prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
        [1, "a", 2],
        ["2: expected string, got integer (2)"],
    ),
    (
        "prefix-items-closed",
        {"prefixItems": [{"type": "integer"}], "items": False},
        [1, 2],
        ["(root): must have at most 1 item, got 2"],
    ),
    (
        "draft7-items-array",
        {"items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
        [1, 2],
        ["1: expected string, got integer (2)"],
    ),
    ("min-items-ok", {"minItems": 1}, [0], []),
    ("min-items-bad", {"minItems": 2}, [0], ["(root): must have at least 2 items, got 1"]),
    ("max-items-ok", {"maxItems": 1}, [0], []),
    ("max-items-bad", {"maxItems": 1}, [0, 1], ["(root): must have at most 1 item, got 2"]),
    ("unique-items-ok", {"uniqueItems": True}, [1, True, "1", [1]], []),
    (
        "unique-items-bad",
        {"uniqueItems": True},
        [1, 2, 1.0],
        ["(root): items must be unique, but items 0 and 2 are equal (1.0)"],
    ),
    (
        "unique-items-objects",
        {"uniqueItems": True},
        [{"a": 1, "b": 2}, {"b": 2, "a": 1}],
        ['(root): items must be unique, but items 0 and 1 are equal ({"b": 2, "a": 1})'],
    ),
    ("unique-items-false", {"uniqueItems": False}, [1, 1], []),
    ("contains-ok", {"contains": {"type": "string"}}, [1, "a"], []),
    (
        "contains-bad",
        {"contains": {"type": "string"}},
        [1, 2],
        ["(root): must contain at least 1 item matching 'contains', got 0"],
    ),
    (
        "max-contains-bad",
        {"contains": {"type": "string"}, "maxContains": 1},
        ["a", "b"],
        ["(root): must contain at most 1 item matching 'contains', got 2"],
    ),
    ("arrays-ignore-objects", {"minItems": 3}, {}, []),
    # objects
    ("object-ok", OBJ, {"name": "a", "age": 3, "other": 1}, []),
    ("required-bad", OBJ, {"age": 3}, ["name: missing required property"]),
    ("properties-bad", OBJ, {"name": "a", "age": "3"}, ['age: expected integer, got string ("3")']),
    (
        "additional-false",
        {**OBJ, "additionalProperties": False},
        {"name": "a", "nmae": "b"},
        ["nmae: unexpected property (allowed: name, age)"],
    ),
    (
        "additional-false-no-properties",
        {"type": "object", "additionalProperties": False},
        {"a": 1},
        ["a: unexpected property (no properties are allowed)"],
    ),
    (
        "additional-schema",
        {**OBJ, "additionalProperties": {"type": "boolean"}},
        {"name": "a", "flag": True, "other": 1},
        ["other: expected boolean, got integer (1)"],
    ),
    (
        "pattern-properties",
        {"patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False},
        {"x-a": "ok", "x-b": 1, "y": 1},
        [
            "x-b: expected string, got integer (1)",
            "y: unexpected property (no properties are allowed)",
        ],
    ),
    (
        "property-names",
        {"propertyNames": {"pattern": "^[a-z]+$"}},
        {"ok": 1, "Bad": 2},
        ['(root): invalid property name "Bad": must match pattern "^[a-z]+$", got "Bad"'],
    ),
    (
        "min-properties-bad",
        {"minProperties": 1},
        {},
        ["(root): must have at least 1 property, got 0"],
    ),
    (
        "max-properties-bad",
        {"maxProperties": 1},
        {"a": 1, "b": 2},
        ["(root): must have at most 1 property, got 2"],
    ),
    ("objects-ignore-arrays", {"required": ["a"]}, [], []),
    # nested paths
    (
        "nested-path",
        {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                }
            },
        },
        {"items": [{"name": "a"}, {}, {"name": 5}]},
        ["items.2.name: expected string, got integer (5)"],
    ),
    (
        "several-problems",
        {**OBJ, "additionalProperties": False},
        {"age": "x", "zzz": 1},
        [
            "name: missing required property",
            'age: expected integer, got string ("x")',
            "zzz: unexpected property (allowed: name, age)",
        ],
    ),
    # combinators
    ("any-of-ok", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, None, []),
    (
        "any-of-types-merge",
        {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "x",
        ['(root): expected integer or null, got string ("x")'],
    ),
    (
        "any-of-enum-or-null",
        {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
        "c",
        ['(root): expected one of "a", "b" or null, got string ("c")'],
    ),
    (
        "any-of-closest-branch",
        {"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}, {"type": "null"}]},
        {"a": "x"},
        ['a: expected integer, got string ("x")'],
    ),
    (
        "any-of-listing",
        {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
        {},
        [
            "(root): does not match any anyOf option: "
            "option 0: a: missing required property | option 1: b: missing required property"
        ],
    ),
    ("one-of-ok", {"oneOf": [{"type": "integer"}, {"type": "string"}]}, 1, []),
    (
        "one-of-none",
        {"oneOf": [{"type": "integer"}, {"type": "string"}]},
        None,
        ["(root): expected integer or string, got null (null)"],
    ),
    (
        "one-of-two",
        {"oneOf": [{"type": "integer"}, {"type": "number"}]},
        1,
        ["(root): must match exactly one oneOf option, but matches options 0, 1 (got 1)"],
    ),
    ("all-of-ok", {"allOf": [{"minimum": 1}, {"maximum": 3}]}, 2, []),
    (
        "all-of-bad",
        {"allOf": [{"minimum": 1}, {"maximum": 3}, {"multipleOf": 2}]},
        5,
        ["(root): must be <= 3, got 5", "(root): must be a multiple of 2, got 5"],
    ),
    ("not-ok", {"not": {"type": "string"}}, 1, []),
    (
        "not-bad",
        {"not": {"type": "string"}},
        "a",
        ["(root): must not match the 'not' schema, got string (\"a\")"],
    ),
    (
        "if-then",
        {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}},
        -1,
        ["(root): must be >= 0, got -1"],
    ),
    (
        "if-else",
        {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}},
        None,
        ["(root): expected string, got null (null)"],
    ),
    # boolean schemas
    ("true-schema", True, {"anything": [1]}, []),
    ("false-schema", False, 1, ["(root): no value is allowed here, got integer (1)"]),
    (
        "false-property",
        {"properties": {"a": False}},
        {"a": 1},
        ["a: no value is allowed here, got integer (1)"],
    ),
    # $ref
    (
        "ref-defs",
        {"$defs": {"N": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/N"}}},
        {"n": "x"},
        ['n: expected integer, got string ("x")'],
    ),
    (
        "ref-definitions",
        {"definitions": {"N": {"type": "integer"}}, "items": {"$ref": "#/definitions/N"}},
        [1, 2.5],
        ["1: expected integer, got number (2.5)"],
    ),
    (
        "ref-with-siblings",
        {"$defs": {"N": {"type": "integer"}}, "$ref": "#/$defs/N", "minimum": 3},
        2,
        ["(root): must be >= 3, got 2"],
    ),
    (
        "ref-escaped-pointer",
        {"$defs": {"a/b": {"type": "string"}}, "$ref": "#/$defs/a~1b"},
        1,
        ["(root): expected string, got integer (1)"],
    ),
    (
        "ref-recursive",
        {
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                    },
                    "required": ["children"],
                }
            },
            "$ref": "#/$defs/Node",
        },
        {"children": [{"children": []}, {"children": [{}]}]},
        ["children.1.children.0.children: missing required property"],
    ),
    (
        "ref-root",
        {"items": {"$ref": "#"}, "type": "array"},
        [[[]], [1]],
        ["1.0: expected array, got integer (1)"],
    ),
    (
        "ref-unresolvable",
        {"$ref": "#/$defs/Nope"},
        1,
        ["(root): schema error: cannot resolve $ref '#/$defs/Nope'"],
    ),
    (
        "ref-self-loop",
        {"$defs": {"A": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"},
        1,
        ["(root): schema error: $ref '#/$defs/A' refers to itself"],
    ),
    # ignored keywords
    ("format-ignored", {"type": "string", "format": "email"}, "not an email", []),
    ("default-ignored", {"type": "integer", "default": "x"}, 1, []),
    ("unknown-keyword-ignored", {"type": "integer", "x-whatever": {"type": "string"}}, 1, []),
    (
        "malformed-keyword-reported",
        {"minLength": "three", "required": True},
        "",
        [
            "(root): schema error: invalid JSON schema: "
            "at minLength: 'three' is not of type 'integer'"
        ],
    ),
    # the draft a schema names is the draft it is validated with
    (
        "draft7-declared",
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "items": [{"type": "integer"}],
            "additionalItems": False,
        },
        [1, 2],
        ["(root): must have at most 1 item, got 2"],
    ),
    (
        "draft4-declared",
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "maximum": 3,
            "exclusiveMaximum": True,
        },
        3,
        ["(root): must be < 3, got 3"],
    ),
    # value display
    (
        "long-value-shortened",
        {"type": "integer"},
        "x" * 100,
        ['(root): expected integer, got string ("' + "x" * 56 + "...)"],
    ),
]


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        pytest.param(schema, value, expected, id=case_id)
        for case_id, schema, value, expected in CASES
    ],
)
def test_schema_problems(schema: Any, value: Any, expected: list[str]) -> None:
    assert schema_problems(schema, value) == expected


def test_schema_problems_rejects_non_schema() -> None:
    with pytest.raises(TypeError, match="must be an object or a boolean"):
        schema_problems("string", "x")  # type: ignore[arg-type]


def test_tuples_are_arrays() -> None:
    assert schema_problems({"type": "array", "items": {"type": "integer"}}, (1, "a")) == [
        '1: expected integer, got string ("a")'
    ]


class Inner(BaseModel):
    a: int


class Cat(BaseModel):
    kind: Literal["cat"]
    meow: int


class Dog(BaseModel):
    kind: Literal["dog"]
    bark: int


class Everything(BaseModel):
    inner: Inner | None = None
    pet: Cat | Dog | None = None
    tags: set[str] = set()
    pair: tuple[int, str] | None = None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            {"inner": {"a": 1}, "pet": {"kind": "cat", "meow": 2}, "tags": ["x"], "pair": [1, "a"]},
            [],
        ),
        ({"inner": {"a": "q"}}, ['inner.a: expected integer, got string ("q")']),
        ({"inner": 5}, ["inner: expected object or null, got integer (5)"]),
        ({"pet": {"kind": "cow"}}, ['pet.kind: expected "cat" or "dog", got string ("cow")']),
        ({"pet": {"kind": "dog", "bark": "x"}}, ['pet.bark: expected integer, got string ("x")']),
        ({"tags": ["a", "a"]}, ['tags: items must be unique, but items 0 and 1 are equal ("a")']),
        (
            {"pair": [1, 2, 3]},
            ["pair: must have at most 2 items, got 3", "pair.1: expected string, got integer (2)"],
        ),
    ],
)
def test_pydantic_generated_schema(value: dict[str, Any], expected: list[str]) -> None:
    schema = Everything.model_json_schema()
    check_schema(schema)
    assert schema_problems(schema, value) == expected


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"items": [{"type": "integer"}], "additionalItems": False},
        {"properties": {"a": True, "b": False}},
        {"$defs": {"A": {"type": "integer"}}, "anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#"}]},
        {"definitions": {"A": {}}, "not": {"$ref": "#/definitions/A"}},
        {"properties": {"type": {"type": "string"}}},
        {"patternProperties": {"^x-": {}}, "pattern": "a+", "format": "anything"},
        {"properties": {"a": {"required": True}}},  # draft-3 leftovers are tolerated
        Everything.model_json_schema(),
    ],
)
def test_check_schema_accepts(schema: dict[str, Any]) -> None:
    check_schema(schema)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("object", "must be a dict, got string"),
        (True, "must be a dict, got boolean"),
        (None, "must be a dict, got null"),
        ({"type": "str"}, "at type: unknown type 'str' \\(did you mean 'string'\\?\\)"),
        ({"type": "float"}, "did you mean 'number'"),
        ({"type": "whatever"}, "unknown type 'whatever'; expected one of array, boolean"),
        ({"type": []}, "non-empty list"),
        ({"type": ["string", "string"]}, "must be distinct"),
        ({"type": 5}, "expected a type name, got integer"),
        ({"properties": {"a": {"type": "int"}}}, "at properties/a/type: unknown type 'int'"),
        ({"properties": {"a": "string"}}, "at properties/a: expected a schema"),
        ({"properties": []}, "at properties: expected an object"),
        ({"items": {"type": "list"}}, "at items/type"),
        ({"items": [{"type": "integer"}, 3]}, "at items/1: expected a schema"),
        ({"anyOf": []}, "at anyOf: expected a non-empty array"),
        ({"oneOf": [{}, {"type": "bogus"}]}, "at oneOf/1/type"),
        ({"additionalProperties": {"type": "dict"}}, "at additionalProperties/type"),
        ({"$defs": {"A": {"type": "nope"}}}, "at \\$defs/A/type"),
        ({"pattern": "("}, "at pattern: invalid regular expression"),
        ({"patternProperties": {"[": {}}}, "at patternProperties/\\[: invalid regular expression"),
        ({"$ref": "#/$defs/Missing"}, "at \\$ref: cannot resolve '#/\\$defs/Missing'"),
        ({"$ref": "https://example.com/schema.json"}, "cannot resolve"),
        ({"$ref": 3}, "at \\$ref: expected a string"),
        ({"minLength": "three"}, "at minLength: 'three' is not of type 'integer'"),
        ({"required": "name"}, "at required: 'name' is not of type 'array'"),
        ({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}}, "refers to itself"),
    ],
)
def test_check_schema_rejects(schema: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_schema(schema)
