"""The Chinese edition's machinery: gettext catalogues keyed by cell id, and the notebooks made from them.

=====================  ==========================================================================
``catalog``            one ``i18n/zh_CN/<stem>.po`` per solution notebook: read, write, update
``notebooks``          the Chinese solutions' sync check (``utils.builder.translate`` makes them)
``glossary``           ``i18n/zh_CN/GLOSSARY.md``: one Chinese term per concept, and its check
``messages``           ``tr()``, ``translate()``, ``set_language()``: what a learner reads, in their language
``extract``            every ``tr()`` message in the source and every exercise's diagnoses
``message_catalog``    ``utils/i18n/locale/zh_CN/<domain>.po``: update from the source, check
``pofile``             a Babel-free reader of ``.po`` files, for a learner's kernel
``readme``             ``README.md`` + ``i18n/zh_CN/README.po`` -> ``README.zh-CN.md``; its sync check
``cli``                ``python -m utils.i18n update | check``
=====================  ==========================================================================

English is the source. The builder (:mod:`utils.builder.translate`) generates ``solutions/zh/`` and
``chapters/zh/`` for every notebook that has a catalogue; ``python -m utils.build --check`` fails when
an English markdown cell of such a notebook lacks a current translation.
"""
