/* The remote level's reading of S3's XML answers (ckpt/remote/s3_client.h):
 * the text of a tag unescaped, whole elements one after another, and an
 * element that is there but unreadable told apart from the end of a page
 * (a listing must fail then, never drop keys in silence). */
#include <criterion/criterion.h>
#include <string.h>

#include "s3_client.h"

Test(s3_xml, next_unescapes_and_moves_on) {
  const char *xml = "<R><Key>a&amp;b&lt;c&gt;&quot;d&#34;&apos;e&#39;</Key><Key>second</Key></R>";
  const char *from = NULL;
  char out[64];
  cr_assert_eq(s3_xml_next(xml, &from, "Key", out, sizeof out), 0);
  cr_assert_str_eq(out, "a&b<c>\"d\"'e'");
  cr_assert_eq(s3_xml_next(xml, &from, "Key", out, sizeof out), 0);
  cr_assert_str_eq(out, "second");
  cr_assert_eq(s3_xml_next(xml, &from, "Key", out, sizeof out), -1);
  cr_assert_eq(s3_xml_next(xml, NULL, "Missing", out, sizeof out), -1);
}

Test(s3_xml, element_end_of_page_and_unreadable_are_different) {
  /* moto writes ListObjectsV2 like this (no spaces, ETag quoted). */
  const char *page = "<ListBucketResult><IsTruncated>true</IsTruncated>"
                     "<Contents><Key>p/k1</Key><ETag>\"9a0e\"</ETag><Size>1000</Size></Contents>"
                     "<Contents><Key>p/k2</Key><Size>7</Size></Contents>"
                     "<NextContinuationToken>c131</NextContinuationToken></ListBucketResult>";
  const char *at = page;
  char one[128], key[32];
  cr_assert_eq(s3_xml_element(&at, "Contents", one, sizeof one), 0);
  cr_assert_eq(s3_xml_next(one, NULL, "Key", key, sizeof key), 0);
  cr_assert_str_eq(key, "p/k1");
  cr_assert_eq(s3_xml_element(&at, "Contents", one, sizeof one), 0);
  cr_assert_eq(s3_xml_next(one, NULL, "Size", key, sizeof key), 0);
  cr_assert_str_eq(key, "7");
  cr_assert_eq(s3_xml_element(&at, "Contents", one, sizeof one), -1, "the end of the page");

  at = page;
  cr_assert_eq(s3_xml_element(&at, "Contents", one, 16), -2, "an element longer than the buffer is not the end");
  at = "<Contents><Key>cut off";
  cr_assert_eq(s3_xml_element(&at, "Contents", one, sizeof one), -2, "an unclosed element is not the end");
}
